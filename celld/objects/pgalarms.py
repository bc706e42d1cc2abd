"""Durable Object alarms on a store shared by several nodes: columns of the object's row in
``do_objects``, so an alarm outlives the node that set it.

The same calls as the alarm half of celld/objects/index.py (the manager uses whichever its
store has), and synchronous like them: `setAlarm()` runs on the object's JS thread and is
committed before it returns. Writes are the owner's only (``owner = this node``): a node
that lost the object cannot move or delete its alarm. Alarms of objects whose owner died
are claimed by live nodes (:meth:`PgAlarms.claim_orphans`, each maintenance tick, ``FOR
UPDATE SKIP LOCKED``, so nodes share them), as orphaned workflow instances with a deadline
are; claiming one makes that node the object's owner, and the alarm fires there.
"""

from __future__ import annotations

from typing import Any

from celld.objects.ids import ObjectRef
from celld.objects.index import Alarm
from celld.objects.placement import Placement
from celld.store.base import Fenced, StoreUnavailable
from celld.store.pgnodes import UNREACHABLE

#: Orphaned objects with an alarm claimed per statement.
CLAIM_PAGE = 100

_GET = (
    "SELECT alarm_name, alarm_at, alarm_retries FROM do_objects "
    "WHERE namespace = $1 AND object = $2 AND alarm_at IS NOT NULL"
)
_SET = (
    "UPDATE do_objects SET alarm_at = $4, alarm_retries = $5, "
    "alarm_name = COALESCE($6, alarm_name) "
    "WHERE namespace = $1 AND object = $2 AND owner = $3 RETURNING 1"
)
_DELETE = (
    "UPDATE do_objects SET alarm_at = NULL, alarm_retries = 0 "
    "WHERE namespace = $1 AND object = $2 AND owner = $3 AND alarm_at IS NOT NULL "
    "AND ($4::bigint IS NULL OR alarm_at = $4) RETURNING 1"
)
_CLAIM_ORPHANS = (
    "UPDATE do_objects d SET owner = $1 FROM (SELECT namespace, object FROM do_objects o "
    "WHERE alarm_at IS NOT NULL AND namespace = ANY($2::text[]) AND (owner IS NULL OR NOT "
    "EXISTS (SELECT 1 FROM celld_nodes n WHERE n.token = o.owner)) LIMIT $3 "
    "FOR UPDATE SKIP LOCKED) f WHERE d.namespace = f.namespace AND d.object = f.object "
    "RETURNING d.namespace, d.object, d.alarm_name, d.alarm_at, d.alarm_retries"
)


class PgAlarms:
    """The alarms of one project's objects in the shared store."""

    def __init__(self, placement: Placement, classes: list[str]) -> None:
        self.placement = placement
        self.classes = classes

    def _run(self, sql: str, *args: Any) -> Any:
        async def run() -> Any:
            pool = self.placement.store.pool
            if pool is None:
                raise StoreUnavailable("the shared store is not open")
            try:
                return await pool.fetchrow(sql, *args)
            except UNREACHABLE as error:
                raise StoreUnavailable(f"the shared store could not be reached: {error}") from error

        return self.placement.blocking(run())

    def get_alarm(self, ref: ObjectRef) -> Alarm | None:
        row = self._run(_GET, ref.cls, ref.id)
        return None if row is None else Alarm(ref, row[0], row[1], row[2])

    def set_alarm(self, ref: ObjectRef, name: str | None, at: int, retries: int = 0) -> None:
        token = self.placement.token
        if self._run(_SET, ref.cls, ref.id, token, at, retries, name) is None:
            raise Fenced(f"{ref.cls}/{ref.id} is not owned by node {token}: its alarm is not set")

    def delete_alarm(self, ref: ObjectRef, at: int | None = None) -> bool:
        return self._run(_DELETE, ref.cls, ref.id, self.placement.token, at) is not None

    async def claim_orphans(self) -> list[Alarm]:
        """Take over objects with an alarm whose owner is gone; their alarms, to schedule."""
        placement = self.placement
        pool = placement.store.pool
        if pool is None:
            return []
        found: list[Alarm] = []
        token = placement.token
        while True:
            async with pool.acquire() as connection, connection.transaction():
                await placement.nodes.hold(connection, token)
                rows = await connection.fetch(_CLAIM_ORPHANS, token, self.classes, CLAIM_PAGE)
            found.extend(Alarm(ObjectRef(r[0], r[1]), r[2], r[3], r[4]) for r in rows)
            if len(rows) < CLAIM_PAGE:
                return found
