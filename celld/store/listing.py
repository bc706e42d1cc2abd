"""Plain reads written once for every SQL backend: existence, expired instances, the
instance event log, cron ticks, and the operator's listings and counts.

They are read-only queries over the `instances` table; the backends differ only in
how a query is run and how its parameters are marked (`?` for SQLite, `$n` for
PostgreSQL). No index serves created_at: a page of a workflow with N instances costs a
sort of N rows (the primary key starts with the workflow, so only its rows are read).
"""

from __future__ import annotations

from typing import Any

from celld.engine import rollback
from celld.store.base import InstanceRef, InstanceSummary, Loaded, LogRow
from celld.store.logpack import unpack
from celld.store.rows import instance_from_row, step_from_row


class SharedReads:
    """Mixed into a store that provides `_fetch(sql, params)` and `_mark(n)`."""

    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        raise NotImplementedError

    def _mark(self, n: int) -> str:
        """The placeholder of the n-th parameter (from 1)."""
        raise NotImplementedError

    def _listing_filter(
        self,
        workflow: str,
        status: str | None,
        created_from: int | None,
        created_to: int | None,
        id_contains: str | None = None,
    ) -> tuple[str, list[Any]]:
        where = [f"workflow = {self._mark(1)}"]
        params: list[Any] = [workflow]
        for clause, value, tail in (
            ("status = ", status, ""),
            ("created_at >= ", created_from, ""),
            ("created_at <= ", created_to, ""),
            # case-insensitive on both backends (SQLite's LIKE is, PostgreSQL's is not)
            ("LOWER(id) LIKE ", _like_pattern(id_contains), " ESCAPE '\\'"),
        ):
            if value is not None:
                params.append(value)
                where.append(clause + self._mark(len(params)) + tail)
        return " AND ".join(where), params

    async def _fetch_many(self, queries: list[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
        """Several SELECTs; a store that can runs them in one trip (SQLite)."""
        return [await self._fetch(sql, params) for sql, params in queries]

    async def peek(self, ref: InstanceRef) -> Loaded | None:
        """The instance row and its rollback phase, no history: a status poll of an
        instance that is not in memory costs no load (a cell built and dropped)."""
        key = (ref.workflow, ref.id)
        rows, phase = await self._fetch_many(
            [
                (
                    f"SELECT * FROM instances WHERE workflow = {self._mark(1)} "
                    f"AND id = {self._mark(2)}",
                    key,
                ),
                (
                    f"SELECT * FROM steps WHERE workflow = {self._mark(1)} AND instance_id = "
                    f"{self._mark(2)} AND type = '{rollback.PHASE}'",
                    key,
                ),
            ]
        )
        if not rows:
            return None
        return Loaded(
            instance_from_row(rows[0]), [step_from_row(r) for r in phase], [], history_dropped=True
        )

    async def exists(self, ref: InstanceRef) -> bool:
        rows = await self._fetch(
            f"SELECT 1 FROM instances WHERE workflow = {self._mark(1)} AND id = {self._mark(2)}",
            (ref.workflow, ref.id),
        )
        return bool(rows)

    async def expired(self, now_ms: int, limit: int) -> list[InstanceRef]:
        """Finished instances whose retention is over (any node may delete them)."""
        rows = await self._fetch(
            "SELECT workflow, id FROM instances WHERE expires_at IS NOT NULL "
            f"AND expires_at <= {self._mark(1)} ORDER BY expires_at LIMIT {self._mark(2)}",
            (now_ms, limit),
        )
        return [InstanceRef(r["workflow"], r["id"]) for r in rows]

    async def log_after(self, ref: InstanceRef, after: int, limit: int) -> list[LogRow]:
        m = self._mark
        rows = await self._fetch(
            "SELECT event_id, timestamp, type, body FROM instance_log WHERE workflow = "
            f"{m(1)} AND instance_id = {m(2)} AND event_id > {m(3)} ORDER BY event_id "
            f"LIMIT {m(4)}",
            (ref.workflow, ref.id, after, limit),
        )
        events: list[LogRow] = []
        for r in rows:  # a row may hold several events (celld.store.logpack)
            events.extend(
                e
                for e in unpack(r["event_id"], r["timestamp"], r["type"], r["body"])
                if e.event_id > after
            )
        return events

    async def log_ended(self, ref: InstanceRef, upto: int) -> bool:
        """Whether a final event (completed, errored, terminated) is logged at or before
        `upto`."""
        m = self._mark
        rows = await self._fetch(
            f"SELECT 1 FROM instance_log WHERE workflow = {m(1)} AND instance_id = {m(2)} "
            f"AND event_id <= {m(3)} AND type IN "
            "('workflow_completed', 'workflow_errored', 'workflow_terminated') LIMIT 1",
            (ref.workflow, ref.id, upto),
        )
        return bool(rows)

    async def schedule_ticks(self, workflow: str) -> dict[str, int]:
        rows = await self._fetch(
            f"SELECT expression, tick FROM schedule_ticks WHERE workflow = {self._mark(1)}",
            (workflow,),
        )
        return {row["expression"]: row["tick"] for row in rows}

    async def counts(self) -> dict[str, int]:
        rows = await self._fetch("SELECT status, COUNT(*) AS n FROM instances GROUP BY status")
        return {row["status"]: row["n"] for row in rows}

    async def list_instances(
        self,
        workflow: str,
        *,
        offset: int = 0,
        limit: int = 25,
        status: str | None = None,
        created_from: int | None = None,
        created_to: int | None = None,
        id_contains: str | None = None,
    ) -> list[InstanceSummary]:
        """One page of a workflow's instances, newest first (ties broken by id)."""
        where, params = self._listing_filter(
            workflow, status, created_from, created_to, id_contains
        )
        n = len(params)
        rows = await self._fetch(
            "SELECT id, status, created_at, started_at, finished_at FROM instances "
            f"WHERE {where} ORDER BY created_at DESC, id DESC "
            f"LIMIT {self._mark(n + 1)} OFFSET {self._mark(n + 2)}",
            (*params, limit, offset),
        )
        return [
            InstanceSummary(
                r["id"], r["status"], r["created_at"], r["started_at"], r["finished_at"]
            )
            for r in rows
        ]

    async def count_instances(
        self,
        workflow: str,
        *,
        status: str | None = None,
        created_from: int | None = None,
        created_to: int | None = None,
        id_contains: str | None = None,
    ) -> int:
        """How many instances `list_instances` with these filters pages through."""
        where, params = self._listing_filter(
            workflow, status, created_from, created_to, id_contains
        )
        rows = await self._fetch(
            f"SELECT COUNT(*) AS n FROM instances WHERE {where}", tuple(params)
        )
        return int(rows[0]["n"])

    async def workflow_counts(self, workflow: str) -> dict[str, int]:
        """Instances of one workflow by status."""
        rows = await self._fetch(
            "SELECT status, COUNT(*) AS n FROM instances WHERE workflow = "
            f"{self._mark(1)} GROUP BY status",
            (workflow,),
        )
        return {row["status"]: row["n"] for row in rows}


def _like_pattern(text: str | None) -> str | None:
    """A LIKE pattern matching ids that contain `text` (lowercased), its `%`, `_` and `\\`
    taken literally."""
    if text is None:
        return None
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
