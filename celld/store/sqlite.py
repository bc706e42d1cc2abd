"""SQLite store with group commit.

Every change the engine acknowledges is committed first (WAL, synchronous=FULL).
One fsync costs about 240 us here, so writes from many instances are gathered
into one transaction: a writer task takes everything queued while the previous
commit ran and commits it together. Cells keep at most one write of their own in
flight, so a batch never holds two writes for one instance and the statements
can be grouped by kind (one executemany each) without reordering anything that
matters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from celld.store.base import InstanceRef, Loaded, Write
from celld.store.rows import (
    SCHEMA,
    UPSERT_EVENT,
    UPSERT_INSTANCE,
    UPSERT_STEP,
    event_from_row,
    event_row,
    instance_from_row,
    instance_row,
    step_from_row,
    step_row,
)

log = logging.getLogger("celld.store")

MAX_BATCH = 1024
SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

_WIPE_STEPS = "DELETE FROM steps WHERE workflow = ? AND instance_id = ?"
_WIPE_EVENTS = "DELETE FROM events WHERE workflow = ? AND instance_id = ?"
_DELETE_INSTANCE = "DELETE FROM instances WHERE workflow = ? AND id = ?"
_DELETE_STEP = (
    "DELETE FROM steps WHERE workflow = ? AND instance_id = ? AND type = ? AND name = ? "
    "AND count = ?"
)
_DELETE_EVENT = "DELETE FROM events WHERE workflow = ? AND instance_id = ? AND seq = ?"


@dataclass
class _Pending:
    writes: list[Write] = field(default_factory=list)
    deletes: list[InstanceRef] = field(default_factory=list)
    future: asyncio.Future[None] | None = None


class SqliteStore:
    """The embedded default store: one file, one writer connection, one reader."""

    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        if synchronous.upper() not in SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(SYNC_MODES)}")
        self.path = path
        self.synchronous = synchronous.upper()
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._writer_task: asyncio.Task[None] | None = None
        self.commits = 0  # transactions committed (for metrics and benchmarks)
        self.rows_written = 0

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = await aiosqlite.connect(self.path)
        await self._writer.execute("PRAGMA journal_mode=WAL")
        await self._writer.execute(f"PRAGMA synchronous={self.synchronous}")
        await self._writer.execute("PRAGMA busy_timeout=10000")
        await self._writer.executescript(SCHEMA)
        await self._writer.commit()
        self._reader = await aiosqlite.connect(self.path)
        self._reader.row_factory = aiosqlite.Row
        await self._reader.execute("PRAGMA busy_timeout=10000")
        self._writer_task = asyncio.get_running_loop().create_task(self._write_loop())

    async def close(self) -> None:
        if self._writer_task is not None:
            await self._queue.join()
            self._writer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer_task
            self._writer_task = None
        for connection in (self._reader, self._writer):
            if connection is not None:
                await connection.close()
        self._reader = self._writer = None

    # -- writes ----------------------------------------------------------------------

    async def write(self, write: Write) -> None:
        await self._submit(_Pending(writes=[write]))

    async def write_many(self, writes: list[Write]) -> None:
        """Commit several instances' changes in one transaction (createBatch)."""
        await self._submit(_Pending(writes=writes))

    async def delete(self, refs: list[InstanceRef]) -> None:
        await self._submit(_Pending(deletes=list(refs)))

    async def _submit(self, pending: _Pending) -> None:
        if self._writer_task is None:
            raise RuntimeError("the store is not open")
        pending.future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(pending)
        await pending.future

    async def _write_loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._commit(batch)
            except Exception as error:  # noqa: BLE001 - every waiter learns the commit failed
                log.exception("commit of %d writes failed", len(batch))
                await self._rollback()
                for pending in batch:
                    assert pending.future is not None
                    if not pending.future.done():
                        pending.future.set_exception(error)
            else:
                for pending in batch:
                    assert pending.future is not None
                    if not pending.future.done():
                        pending.future.set_result(None)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _rollback(self) -> None:
        assert self._writer is not None
        try:
            await self._writer.rollback()
        except Exception:  # noqa: BLE001 - the original error is what gets reported
            log.exception("rollback failed")

    async def _commit(self, batch: list[_Pending]) -> None:
        connection = self._writer
        assert connection is not None
        wipes: list[tuple[str, str]] = []
        deleted_instances: list[tuple[str, str]] = []
        deleted_steps: list[tuple[Any, ...]] = []
        deleted_events: list[tuple[Any, ...]] = []
        instances: list[tuple[Any, ...]] = []
        steps: list[tuple[Any, ...]] = []
        events: list[tuple[Any, ...]] = []
        for pending in batch:
            for ref in pending.deletes:
                wipes.append((ref.workflow, ref.id))
                deleted_instances.append((ref.workflow, ref.id))
            for write in pending.writes:
                workflow, instance_id = write.ref.workflow, write.ref.id
                changes = write.changes
                if changes.wiped or changes.created:
                    wipes.append((workflow, instance_id))
                for key in changes.deleted_steps:
                    deleted_steps.append((workflow, instance_id, key.type, key.name, key.count))
                for seq in changes.deleted_events:
                    deleted_events.append((workflow, instance_id, seq))
                if changes.instance is not None:
                    instances.append(
                        instance_row(changes.instance, write.next_wake, write.runnable)
                    )
                steps.extend(step_row(workflow, instance_id, s) for s in changes.steps)
                events.extend(event_row(workflow, instance_id, e) for e in changes.events)
        for sql, rows in (
            (_WIPE_STEPS, wipes),
            (_WIPE_EVENTS, wipes),
            (_DELETE_INSTANCE, deleted_instances),
            (_DELETE_STEP, deleted_steps),
            (_DELETE_EVENT, deleted_events),
            (UPSERT_INSTANCE, instances),
            (UPSERT_STEP, steps),
            (UPSERT_EVENT, events),
        ):
            if rows:
                await connection.executemany(sql, rows)
        await connection.commit()
        self.commits += 1
        self.rows_written += len(instances) + len(steps) + len(events)

    # -- reads -----------------------------------------------------------------------

    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        assert self._reader is not None
        async with self._reader.execute(sql, params) as cursor:
            return list(await cursor.fetchall())

    async def load(self, ref: InstanceRef) -> Loaded | None:
        rows = await self._fetch(
            "SELECT * FROM instances WHERE workflow = ? AND id = ?", (ref.workflow, ref.id)
        )
        if not rows:
            return None
        steps = await self._fetch(
            "SELECT * FROM steps WHERE workflow = ? AND instance_id = ? ORDER BY seq",
            (ref.workflow, ref.id),
        )
        events = await self._fetch(
            "SELECT * FROM events WHERE workflow = ? AND instance_id = ? ORDER BY seq",
            (ref.workflow, ref.id),
        )
        return Loaded(
            instance_from_row(rows[0]),
            [step_from_row(r) for r in steps],
            [event_from_row(r) for r in events],
        )

    async def exists(self, ref: InstanceRef) -> bool:
        rows = await self._fetch(
            "SELECT 1 FROM instances WHERE workflow = ? AND id = ?", (ref.workflow, ref.id)
        )
        return bool(rows)

    async def existing(self, workflow: str, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        marks = ", ".join("?" for _ in ids)
        rows = await self._fetch(
            f"SELECT id FROM instances WHERE workflow = ? AND id IN ({marks})",
            (workflow, *ids),
        )
        return {row["id"] for row in rows}

    async def due(self, before_ms: int, limit: int) -> list[tuple[InstanceRef, int]]:
        rows = await self._fetch(
            "SELECT workflow, id, next_wake FROM instances WHERE next_wake IS NOT NULL "
            "AND next_wake < ? ORDER BY next_wake LIMIT ?",
            (before_ms, limit),
        )
        return [(InstanceRef(r["workflow"], r["id"]), r["next_wake"]) for r in rows]

    async def runnable(self) -> list[InstanceRef]:
        rows = await self._fetch("SELECT workflow, id FROM instances WHERE runnable = 1")
        return [InstanceRef(r["workflow"], r["id"]) for r in rows]

    async def expired(self, now_ms: int, limit: int) -> list[InstanceRef]:
        rows = await self._fetch(
            "SELECT workflow, id FROM instances WHERE expires_at IS NOT NULL AND expires_at <= ? "
            "ORDER BY expires_at LIMIT ?",
            (now_ms, limit),
        )
        return [InstanceRef(r["workflow"], r["id"]) for r in rows]

    async def counts(self) -> dict[str, int]:
        rows = await self._fetch("SELECT status, COUNT(*) AS n FROM instances GROUP BY status")
        return {row["status"]: row["n"] for row in rows}
