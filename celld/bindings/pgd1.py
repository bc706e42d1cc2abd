"""A D1 database on a store shared by several nodes: an object with SQL storage.

As in workerd, where a D1 database is a Durable Object, the database is owned by one node
at a time (celld/objects/placement.py): that node runs its queries on its own SQLite file
(D1's dialect, errors and sandbox, celld/bindings/d1.py, unchanged), and each query or
batch writes the pages it changed to PostgreSQL before it answers. A query reaching
another node is forwarded to the owner through ``celld_inbox``; when the owner dies, the
next query places the database on a live node, which rebuilds the file from its pages.

Queries of one database run one at a time on its owner (a lock around query and page
write): a query never reads what a commit not yet written to the store left in the file.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from celld.bindings import migrations
from celld.bindings.d1 import D1Database
from celld.isolate.host import HostError
from celld.objects.placement import Claim, Placement, SharedFile
from celld.store.base import StoreUnavailable

NAMESPACE = "d1"


def _pending(conn: sqlite3.Connection, message: dict[str, Any]) -> list[str]:
    """Of the migration names given, those not applied yet, in order."""
    done = set(migrations.applied(conn, message["table"]))
    return [name for name in message["names"] if name not in done]


def _migrate(conn: sqlite3.Connection, message: dict[str, Any]) -> list[str]:
    """Apply the given migrations not applied yet, in order; the names applied (an error
    names the migration that failed; those before it stay applied)."""
    done = set(migrations.applied(conn, message["table"]))
    applied = []
    for name, text in message["migrations"]:
        if name not in done:
            try:
                migrations.apply_text(conn, name, text, message["table"])
            except migrations.MigrationError as error:
                raise HostError(
                    f"migration failed: {error} (applied before it: {applied})"
                ) from None
            applied.append(name)
    return applied


#: Operator methods (route "d1admin"): never reachable from a Worker's `d1` operation.
ADMIN = {"pending": _pending, "migrate": _migrate}


class SharedD1Database:
    def __init__(
        self, placement: Placement, db_id: str, path: Path, *, synchronous: str = "FULL"
    ) -> None:
        self.placement = placement
        self.db_id = db_id
        self.key = (NAMESPACE, db_id)
        self.path = path
        self.synchronous = synchronous
        self.local: D1Database | None = None  # open while this node owns it
        self.shared = SharedFile(placement, self.key, path)
        self.epoch = -1  # the lease epoch `local` was opened under
        self._lock = asyncio.Lock()

    async def open(self) -> SharedD1Database:
        return self  # opened on its first query here, once this node owns it

    async def close(self) -> None:
        async with self._lock:
            await self._drop()

    async def _drop(self) -> None:
        local, self.local = self.local, None
        if local is not None:
            await local.close()

    async def call(self, message: dict[str, Any], route: str = "d1") -> Any:
        """A `d1` operation (query or exec) from a Worker here or forwarded by another node;
        with `route` "d1admin", an operator's (the pending migrations, or applying them:
        `celld d1 migrations` on a shared store), never a Worker's."""
        message = {**message, "to": route}  # (what may run here depends on the route)
        lease = self.placement.lease
        if self.local is not None and self.epoch == lease.epoch and lease.allows_effects():
            return await self._here(None, message)  # open here: this node owns it

        async def here(claim: Claim) -> Any:
            return await self._here(claim, message)

        try:
            if message.get("forwarded"):
                return await here(await self.placement.claim_here(self.key))
            return await self.placement.place(self.key, here, message)
        except StoreUnavailable as error:  # (its file could not be rebuilt from the store)
            raise HostError(f"D1_ERROR: the shared store is unavailable: {error}") from None

    async def _here(self, claim: Claim | None, message: dict[str, Any]) -> Any:
        async with self._lock:
            if claim is not None and (
                self.local is None or self.epoch != self.placement.lease.epoch
            ):
                await self._drop()
                epoch = self.placement.lease.epoch
                await self.shared.prepare(claim)
                local = await D1Database(self.path, synchronous=self.synchronous).open()
                await local.file.run(self.shared.attach)
                self.local, self.epoch = local, epoch
            local = self.local
            if local is None:  # dropped meanwhile (the node rejoined): place it again
                raise HostError("D1_ERROR: the database moved to another node; retry the query")
            failed: HostError | None = None
            try:
                result = await self._run_method(local, message)
            except HostError as error:  # what committed before it (migrations) still ships
                failed = error
            changes = await local.file.run(self.shared.changes)
            if changes is not None:
                try:
                    await self.shared.ship(changes)
                except StoreUnavailable as error:
                    await self._drop()  # its file holds a commit the store did not take
                    raise HostError(
                        f"D1_ERROR: the query's changes could not be written to the shared "
                        f"store, so they are not kept: {error}"
                    ) from None
                await local.file.run(self.shared.shipped)
            if failed is not None:
                raise failed
            return result

    @staticmethod
    async def _run_method(local: D1Database, message: dict[str, Any]) -> Any:
        method = message.get("method")
        if method == "query":
            return await local.query(
                message.get("statements") or [], batch=bool(message.get("batch"))
            )
        if method == "exec":
            return await local.exec(message.get("sql"))  # type: ignore[arg-type]
        if message.get("to") == "d1admin" and method in ADMIN:
            return await local.file.run(ADMIN[method], message)
        raise HostError(f"celld: D1 has no method {method!r}")
