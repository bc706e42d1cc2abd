"""SQLite store with group commit.

Every change the engine acknowledges is committed first (WAL, synchronous=FULL).
One fsync costs about 240 us here, so writes from many instances are gathered
into one transaction: a writer thread takes everything queued while the previous
commit ran and commits it together. Cells keep at most one write of their own in
flight, so a batch never holds two writes for one instance and the statements
can be grouped by kind (one executemany each) without reordering anything that
matters.

The writer is a plain thread with its own sqlite3 connection rather than an
aiosqlite connection: aiosqlite hops back to the event loop after every
statement, so a commit of k statement kinds took k+1 trips through a busy loop
(about 5 ms a commit under load, which capped the whole engine; see
bench/PROFILE.md). The thread runs a whole batch in one go and settles all its
writers with one call back into the loop. Reads stay on aiosqlite.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from concurrent.futures import Future
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
    """The embedded default store: one file, one writer thread, one reader connection."""

    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        if synchronous.upper() not in SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(SYNC_MODES)}")
        self.path = path
        self.synchronous = synchronous.upper()
        self._reader: aiosqlite.Connection | None = None
        #: Pending writes for the writer thread; None tells it to stop.
        self._jobs: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._writer_thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.commits = 0  # transactions committed (for metrics and benchmarks)
        self.rows_written = 0

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.get_running_loop()
        ready: Future[None] = Future()
        self._writer_thread = threading.Thread(
            target=self._writer_main, args=(ready,), name="celld-sqlite-writer", daemon=True
        )
        self._writer_thread.start()
        await asyncio.wrap_future(ready)
        self._reader = await aiosqlite.connect(self.path)
        self._reader.row_factory = aiosqlite.Row
        await self._reader.execute("PRAGMA busy_timeout=10000")

    async def close(self) -> None:
        thread, self._writer_thread = self._writer_thread, None
        if thread is not None:
            self._jobs.put(None)  # after every write queued so far: they commit first
            await asyncio.to_thread(thread.join)
        if self._reader is not None:
            await self._reader.close()
        self._reader = None

    # -- writes ----------------------------------------------------------------------

    async def write(self, write: Write) -> None:
        await self._submit(_Pending(writes=[write]))

    async def write_many(self, writes: list[Write]) -> None:
        """Commit several instances' changes in one transaction (createBatch)."""
        await self._submit(_Pending(writes=writes))

    async def delete(self, refs: list[InstanceRef]) -> None:
        await self._submit(_Pending(deletes=list(refs)))

    async def _submit(self, pending: _Pending) -> None:
        if self._writer_thread is None:
            raise RuntimeError("the store is not open")
        pending.future = asyncio.get_running_loop().create_future()
        self._jobs.put(pending)
        await pending.future

    # -- the writer thread -------------------------------------------------------------

    def _writer_main(self, ready: Future[None]) -> None:
        """Open the write connection, then commit batches until told to stop."""
        try:
            connection = sqlite3.connect(self.path)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(f"PRAGMA synchronous={self.synchronous}")
            connection.execute("PRAGMA busy_timeout=10000")
            connection.executescript(SCHEMA)
            connection.commit()
        except BaseException as error:  # noqa: BLE001 - open() reports it
            ready.set_exception(error)
            return
        ready.set_result(None)
        try:
            stopping = False
            while not stopping:
                first = self._jobs.get()
                if first is None:
                    break
                batch = [first]
                while len(batch) < MAX_BATCH:
                    try:
                        item = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stopping = True
                        break
                    batch.append(item)
                error: Exception | None = None
                try:
                    self._commit(connection, batch)
                except Exception as failure:  # noqa: BLE001 - every waiter learns it failed
                    log.exception("commit of %d writes failed", len(batch))
                    self._rollback(connection)
                    error = failure
                assert self._loop is not None
                # RuntimeError: the loop is closed, nobody is waiting any more
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._settle, batch, error)
        finally:
            connection.close()

    @staticmethod
    def _settle(batch: list[_Pending], error: Exception | None) -> None:
        """On the event loop: tell every writer of `batch` how its commit went."""
        for pending in batch:
            future = pending.future
            if future is None or future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

    @staticmethod
    def _rollback(connection: sqlite3.Connection) -> None:
        try:
            connection.rollback()
        except Exception:  # noqa: BLE001 - the original error is what gets reported
            log.exception("rollback failed")

    def _commit(self, connection: sqlite3.Connection, batch: list[_Pending]) -> None:
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
                connection.executemany(sql, rows)
        connection.commit()
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

    async def retained_until(self, ref: InstanceRef) -> tuple[bool, int | None]:
        """(exists, expires_at): whether an id is taken and until when it is retained."""
        rows = await self._fetch(
            "SELECT expires_at FROM instances WHERE workflow = ? AND id = ?",
            (ref.workflow, ref.id),
        )
        return (True, rows[0]["expires_at"]) if rows else (False, None)

    async def existing(self, workflow: str, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        marks = ", ".join("?" for _ in ids)
        rows = await self._fetch(
            f"SELECT id FROM instances WHERE workflow = ? AND id IN ({marks})",
            (workflow, *ids),
        )
        return {row["id"] for row in rows}

    async def due(
        self, before_ms: int, limit: int, after: tuple[int, str, str] | None = None
    ) -> list[tuple[InstanceRef, int]]:
        """Deadlines before `before_ms`, earliest first; `after` = (when, workflow, id) of
        the last row of the previous page (keyset paging over the next_wake index)."""
        start = after or (-(2**62), "", "")
        rows = await self._fetch(
            "SELECT workflow, id, next_wake FROM instances WHERE next_wake IS NOT NULL "
            "AND next_wake < ? AND (next_wake, workflow, id) > (?, ?, ?) "
            "ORDER BY next_wake, workflow, id LIMIT ?",
            (before_ms, *start, limit),
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
