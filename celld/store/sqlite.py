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

Failures (see celld/store/base.py for the rules): a batch that cannot commit is
rolled back and every writer in it gets `StoreUnavailable`; creates of an id that is
taken get `DuplicateInstance` and are left out of the batch, which commits the rest. If
the writer thread itself dies, its queued writers are failed at once and the next write
starts a new one, so nobody waits forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import aiosqlite

from celld.engine.binary import join_texts
from celld.engine.decisions import JournalText
from celld.store.base import (
    InstanceRef,
    Loaded,
    NodeEvents,
    OwnedElsewhere,
    StoreUnavailable,
)
from celld.store.batch import Gathered, GroupCommitWrites, Pending, Statements, settle
from celld.store.health import StoreHealth
from celld.store.lease import NO_LEASE, Lease
from celld.store.listing import SharedReads
from celld.store.rows import (
    ADDED_INSTANCE_COLUMNS,
    BINARY_JOURNAL_SQL,
    INSERT_INSTANCE,
    JOURNAL_SQL,
    SCHEMA,
    UNFINISHED_STEPS_WHERE,
    UPSERT_EVENT,
    UPSERT_INSTANCE,
    UPSERT_STEP,
    event_from_row,
    instance_from_row,
    instance_row,
    journal_text,
    step_from_row,
)

log = logging.getLogger("celld.store")

MAX_BATCH = 1024
SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

_WIPE_STEPS = "DELETE FROM steps WHERE workflow = ? AND instance_id = ?"
_WIPE_EVENTS = "DELETE FROM events WHERE workflow = ? AND instance_id = ?"
_DELETE_INSTANCE = "DELETE FROM instances WHERE workflow = ? AND id = ?"
_DELETE_LOG = "DELETE FROM instance_log WHERE workflow = ? AND instance_id = ?"
#: one row per write, with the id of its last event (celld.store.logpack)
_INSERT_LOG = (
    "INSERT INTO instance_log (event_id, workflow, instance_id, timestamp, type, body) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
#: the last event id ever used: AUTOINCREMENT's record, or a row written without it
_LAST_LOG_ID = (
    "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'instance_log'), 0), "
    "coalesce((SELECT max(event_id) FROM instance_log), 0))"
)
_DELETE_STEP = (
    "DELETE FROM steps WHERE workflow = ? AND instance_id = ? AND type = ? AND name = ? "
    "AND count = ?"
)
_DELETE_EVENT = "DELETE FROM events WHERE workflow = ? AND instance_id = ? AND seq = ?"
_RETAINED_UNTIL = "SELECT expires_at FROM instances WHERE workflow = ? AND id = ?"
_RECORD_TICK = (
    "INSERT INTO schedule_ticks (workflow, expression, tick) VALUES (?, ?, ?) "
    "ON CONFLICT (workflow, expression) DO UPDATE SET tick = max(tick, excluded.tick)"
)
_STATEMENTS = Statements(
    _WIPE_STEPS,
    _WIPE_EVENTS,
    _DELETE_STEP,
    _DELETE_EVENT,
    INSERT_INSTANCE,
    UPSERT_INSTANCE,
    UPSERT_STEP,
    UPSERT_EVENT,
    _INSERT_LOG,
)
_PROBE = "INSERT OR REPLACE INTO celld_probe (id, at) VALUES (1, strftime('%s','now'))"


class SqliteStore(GroupCommitWrites, SharedReads):
    """The embedded default store: one file, one writer thread, one reader connection."""

    #: one node has the file to itself: nothing to renew, nothing to fence
    lease: Lease = NO_LEASE

    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        if synchronous.upper() not in SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(SYNC_MODES)}")
        self.path = path
        self.synchronous = synchronous.upper()
        self.health = StoreHealth()
        #: Called on the writer thread before each commit; whatever it raises fails that
        #: commit as a real one would. Tests inject storage faults through it.
        self.fault: Callable[[], None] | None = None
        #: The same for reads: called on the reader's thread before each read of several
        #: queries (a load, a batch's claim, a journal).
        self.read_fault: Callable[[], None] | None = None
        self._reader: aiosqlite.Connection | None = None
        #: Pending writes for the writer thread; None tells it to stop.
        self._jobs: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        self._writer_thread: threading.Thread | None = None
        self._writer_lock = threading.Lock()  # orders "queue a job" against "writer died"
        self._writer_dead = False
        self._open = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.commits = 0  # transactions committed (for metrics and benchmarks)
        self.rows_written = 0
        self.claims = 0  # instances loaded to run or change (for benchmarks and tests)
        #: trips to the reader's thread (for benchmarks and tests: a batch's claim is one)
        self.read_trips = 0
        self.journal_reads = 0  # journals read on their own, not with a batch's claim
        self.writer_restarts = 0
        #: the last event log id handed out (the writer thread numbers the log's events)
        self._log_id = 0

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.get_running_loop()
        await asyncio.wrap_future(self._start_writer())
        self._reader = await aiosqlite.connect(self.path)
        self._reader.row_factory = aiosqlite.Row
        await self._reader.execute("PRAGMA busy_timeout=10000")
        self._open = True

    async def close(self) -> None:
        self._flush_soon()  # writes queued in this pass go before the writer stops
        self._open = False
        thread, self._writer_thread = self._writer_thread, None
        if thread is not None and thread.is_alive():
            self._jobs.put(None)  # after every write queued so far: they commit first
            await asyncio.to_thread(thread.join)
        if self._reader is not None:
            await self._reader.close()
        self._reader = None

    # -- writes ----------------------------------------------------------------------

    def _enqueue(self, pending: Pending) -> None:
        if not self._open and self._writer_thread is None:
            raise StoreUnavailable("the store is not open")
        with self._writer_lock:
            if self._writer_dead:
                self._restart_writer()
            self._jobs.put(pending)

    def _restart_writer(self) -> None:
        """Called with the writer lock held, after the writer thread died."""
        self.writer_restarts += 1
        log.error("the store's writer thread had stopped; starting a new one")
        self._writer_dead = False
        self._start_writer()

    # -- the writer thread -------------------------------------------------------------

    def _start_writer(self) -> Future[None]:
        """A writer thread with a queue of its own: a dead writer's queue is failed as a
        whole, and nothing queued for its successor can land in it."""
        ready: Future[None] = Future()
        self._jobs = queue.SimpleQueue()
        self._writer_thread = threading.Thread(
            target=self._writer_main,
            args=(ready, self._jobs),
            name="celld-sqlite-writer",
            daemon=True,
        )
        self._writer_thread.start()
        return ready

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={self.synchronous}")
        connection.execute("PRAGMA busy_timeout=10000")
        connection.executescript(SCHEMA)
        have = {row[1] for row in connection.execute("PRAGMA table_info(instances)")}
        for column, kind in ADDED_INSTANCE_COLUMNS.items():
            if column not in have:  # a state folder from an older celld
                connection.execute(f"ALTER TABLE instances ADD COLUMN {column} {kind}")
        connection.commit()
        self._log_id = connection.execute(_LAST_LOG_ID).fetchone()[0]
        return connection

    def _writer_main(self, ready: Future[None], jobs: queue.SimpleQueue[Pending | None]) -> None:
        """Open the write connection, then commit batches until told to stop."""
        try:
            connection = self._connect()
        except BaseException as error:  # noqa: BLE001 - open() or the waiting writers report it
            ready.set_exception(error)
            self._writer_stopped(error, jobs)
            return
        ready.set_result(None)
        try:
            self._commit_loop(connection, jobs)
        except BaseException as error:  # noqa: BLE001 - the writers queued are failed below
            log.exception("the store's writer thread stopped")
            self._writer_stopped(error, jobs)
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def _commit_loop(
        self, connection: sqlite3.Connection, jobs: queue.SimpleQueue[Pending | None]
    ) -> None:
        while True:
            first = jobs.get()
            if first is None:
                return
            batch = [first]
            stopping = False
            while len(batch) < MAX_BATCH:
                try:
                    item = jobs.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            try:
                outcome: dict[int, set[InstanceRef]] | Exception = self._commit(connection, batch)
            except Exception as failure:  # noqa: BLE001 - every writer of the batch learns it
                log.warning("commit of %d writes failed: %s", len(batch), failure)
                self._rollback(connection)
                outcome = StoreUnavailable(f"the store could not commit: {failure}")
            except BaseException as fatal:
                self._rollback(connection)
                with self._writer_lock:  # before anyone hears of it: the next write restarts
                    if self._jobs is jobs:
                        self._writer_dead = True
                stopped = StoreUnavailable(f"the store's writer stopped: {fatal!r}")
                self._call_loop(self._settle, batch, stopped)
                raise
            self._call_loop(self._settle, batch, outcome)
            if stopping:
                return

    def _writer_stopped(
        self, error: BaseException, jobs: queue.SimpleQueue[Pending | None]
    ) -> None:
        """The writer thread is ending abnormally: fail every writer queued for it now (a
        write queued later starts a new thread with a queue of its own; see `_enqueue`)."""
        with self._writer_lock:
            if self._jobs is jobs:
                self._writer_dead = True
            queued: list[Pending] = []
            while True:
                try:
                    item = jobs.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    queued.append(item)
        failure = StoreUnavailable(f"the store's writer stopped: {error!r}")
        self._call_loop(self._settle, queued, failure)

    def _call_loop(self, callback: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        # RuntimeError: the loop is closed, nobody is waiting any more
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(callback, *args)

    def _settle(self, batch: list[Pending], outcome: dict[int, Any] | Exception) -> None:
        settle(batch, outcome, self.health, self.on_committed)

    @staticmethod
    def _rollback(connection: sqlite3.Connection) -> None:
        try:
            connection.rollback()
        except Exception:  # noqa: BLE001 - the original error is what gets reported
            log.exception("rollback failed")

    @staticmethod
    def _claim_id(connection: sqlite3.Connection, ref: InstanceRef, now: int) -> bool:
        """True if `ref` may be created: unused, or retained no longer (its rows go now)."""
        row = connection.execute(_RETAINED_UNTIL, (ref.workflow, ref.id)).fetchone()
        if row is None:
            return True
        expires_at = row[0]
        if expires_at is None or expires_at > now:
            return False
        SqliteStore._delete_instance(connection, ref)
        return True

    @staticmethod
    def _delete_instance(connection: sqlite3.Connection, ref: InstanceRef) -> None:
        key = (ref.workflow, ref.id)
        connection.execute(_WIPE_STEPS, key)
        connection.execute(_WIPE_EVENTS, key)
        connection.execute(_DELETE_LOG, key)
        connection.execute(_DELETE_INSTANCE, key)

    def _commit(
        self, connection: sqlite3.Connection, batch: list[Pending]
    ) -> dict[int, set[InstanceRef]]:
        """Commit `batch` in one transaction; returns, by position in the batch, the creates
        left out because their id is taken."""
        if self.fault is not None:
            self.fault()
        skipped: dict[int, set[InstanceRef]] = {}
        created_here: set[InstanceRef] = set()
        rows = Gathered(pack_log=True)
        for index, pending in enumerate(batch):
            if pending.probe:
                connection.execute(_PROBE)
            if pending.ticks:
                connection.executemany(_RECORD_TICK, pending.ticks)
            for ref in pending.expired:
                if self._claim_id(connection, ref, pending.now):
                    created_here.discard(ref)
            for write in pending.writes:
                changes = write.changes
                if write.delete:
                    self._delete_instance(connection, write.ref)
                    created_here.discard(write.ref)
                    continue
                if changes.created:
                    assert changes.instance is not None
                    now = changes.instance.created_at
                    if write.ref in created_here or not self._claim_id(connection, write.ref, now):
                        skipped.setdefault(index, set()).add(write.ref)
                        continue
                    created_here.add(write.ref)
                if changes.instance is not None:
                    row = instance_row(changes.instance, write.next_wake, write.runnable)
                    (rows.created if changes.created else rows.instances).append(row)
                rows.add_history(write)
        if rows.log:
            rows.log = self._number_log(rows.log)
        for sql, values in rows.in_order(_STATEMENTS):
            connection.executemany(sql, values)
        connection.commit()
        self.commits += 1
        self.rows_written += rows.rows_written
        return skipped

    def _number_log(self, packed: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Give each packed log row the id of its last event: it owns the ids of its
        events (celld.store.logpack). Ids of a batch that fails to commit are skipped,
        never reused: they only need to increase."""
        numbered = []
        last = self._log_id
        for workflow, instance_id, timestamp, kind, body, events in packed:
            last += events
            numbered.append((last, workflow, instance_id, timestamp, kind, body))
        self._log_id = last
        return numbered

    # -- reads -----------------------------------------------------------------------

    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self._reader is None:
            raise StoreUnavailable("the store is not open")
        self.read_trips += 1
        try:
            # One trip to the reader's thread for execute and fetch: a SELECT holds its
            # snapshot until it is read to the end, so a statement left half read while
            # another coroutine's query ran would show that query a state from before
            # commits already acknowledged.
            return list(await self._reader.execute_fetchall(sql, params))
        except (sqlite3.Error, ValueError) as error:  # ValueError: aiosqlite closed
            raise StoreUnavailable(f"the store could not be read: {error}") from error

    async def load(self, ref: InstanceRef) -> Loaded | None:
        return await self._load(ref, light=False)

    async def _fetch_many(self, queries: list[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
        """Several SELECTs in one trip to the reader's thread, in one read transaction
        (one snapshot for all). A trip costs two thread hand-overs and a pass of the
        event loop; an instance's load is three queries (measured in bench/PROFILE.md,
        "The log nobody reads and the reads of a wake-up")."""
        if self._reader is None:
            raise StoreUnavailable("the store is not open")
        self.read_trips += 1
        reader = self._reader
        fault = self.read_fault

        def run() -> list[list[Any]]:
            # aiosqlite runs this on its own thread, where its connection lives
            connection = reader._conn  # noqa: SLF001 - the thread's own connection
            if fault is not None:
                fault()
            began = not connection.in_transaction
            if began:
                connection.execute("BEGIN")
            try:
                return [connection.execute(sql, params).fetchall() for sql, params in queries]
            finally:
                if began:
                    connection.execute("COMMIT")

        try:
            return await reader._execute(run)  # noqa: SLF001 - aiosqlite's one-trip call
        except (sqlite3.Error, ValueError) as error:  # ValueError: aiosqlite closed
            raise StoreUnavailable(f"the store could not be read: {error}") from error

    @staticmethod
    def _load_queries(ref: InstanceRef, *, light: bool) -> list[tuple[str, tuple[Any, ...]]]:
        """The instance row, its steps and its events (light: only the unfinished ones)."""
        key = (ref.workflow, ref.id)
        steps_where = f" AND {UNFINISHED_STEPS_WHERE}" if light else ""
        events_where = " AND consumed_by IS NULL" if light else ""
        return [
            ("SELECT * FROM instances WHERE workflow = ? AND id = ?", key),
            (
                "SELECT * FROM steps WHERE workflow = ? AND instance_id = ?"
                f"{steps_where} ORDER BY seq",
                key,
            ),
            (
                f"SELECT * FROM events WHERE workflow = ? AND instance_id = ?{events_where} "
                "ORDER BY seq",
                key,
            ),
        ]

    @staticmethod
    def _loaded(
        rows: list[Any], steps: list[Any], events: list[Any], *, light: bool,
        journal: JournalText | None = None,
    ) -> Loaded | None:  # fmt: skip
        if not rows:
            return None
        return Loaded(
            instance_from_row(rows[0]),
            [step_from_row(r) for r in steps],
            [event_from_row(r) for r in events],
            history_dropped=light,
            journal=journal,
        )

    async def _load(self, ref: InstanceRef, *, light: bool) -> Loaded | None:
        rows, steps, events = await self._fetch_many(self._load_queries(ref, light=light))
        return self._loaded(rows, steps, events, light=light)

    async def claim(self, ref: InstanceRef) -> Loaded | None:
        """One node owns everything in its own file. A light load: an instance with a
        long history costs only its unfinished rows to bring into memory."""
        self.claims += 1
        return await self._load(ref, light=True)

    async def claim_many(
        self, refs: list[InstanceRef]
    ) -> dict[InstanceRef, Loaded | OwnedElsewhere]:
        """Light loads of several instances and their journals in one trip to the reader's
        thread and one snapshot: a batch of wake-ups admitted together costs one trip, not
        two for each (bench/PROFILE.md, "A batch's reads in one trip"). The journal read
        with the rows is what `journal` would have read at that moment."""
        queries: list[tuple[str, tuple[Any, ...]]] = []
        for ref in refs:
            key = (ref.workflow, ref.id)
            queries += self._load_queries(ref, light=True)
            queries += [(JOURNAL_SQL, key), (BINARY_JOURNAL_SQL, key)]
        results = await self._fetch_many(queries)
        self.claims += len(refs)
        claimed: dict[InstanceRef, Loaded | OwnedElsewhere] = {}
        for i, ref in enumerate(refs):
            rows, steps, events, journal, binary = results[5 * i : 5 * i + 5]
            loaded = self._loaded(
                rows, steps, events, light=True, journal=self._journal_of(journal, binary)
            )
            if loaded is not None:
                claimed[ref] = loaded
        return claimed

    async def journal(self, ref: InstanceRef) -> JournalText:
        """Built by SQLite in one statement: no row becomes a Python object. The rows
        with binary values come in the same trip to the reader's thread (and snapshot):
        a wake-up reads its journal once, and a second trip cost each one a hand-over
        and a pass of the event loop (bench/PROFILE.md, "With runs sharing isolates")."""
        key = (ref.workflow, ref.id)
        self.journal_reads += 1
        rows, binary = await self._fetch_many([(JOURNAL_SQL, key), (BINARY_JOURNAL_SQL, key)])
        return self._journal_of(rows, binary)

    @staticmethod
    def _journal_of(rows: list[Any], binary: list[Any]) -> JournalText:
        """The journal text of `JOURNAL_SQL`'s rows with `BINARY_JOURNAL_SQL`'s joined in."""
        sections = {row[0]: row[1] or "" for row in rows}
        text = JournalText(sections.get(0, ""), sections.get(1, ""))
        if not binary:
            return text
        extra = journal_text(step_from_row(row) for row in binary)
        return JournalText(
            *(
                join_texts(",", [part for part in pair if part])
                for pair in zip(text, extra, strict=True)
            )
        )

    async def serve(self, events: NodeEvents) -> None:
        """Nothing to do: no other node shares this file."""

    async def forward(self, owner: int, message: dict[str, Any]) -> Any:
        raise RuntimeError("a SQLite store has one node: nothing is owned elsewhere")

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

    async def runnable(self, limit: int, after: InstanceRef | None = None) -> list[InstanceRef]:
        start = (after.workflow, after.id) if after is not None else ("", "")
        rows = await self._fetch(
            "SELECT workflow, id FROM instances WHERE runnable = 1 AND (workflow, id) > (?, ?) "
            "ORDER BY workflow, id LIMIT ?",
            (*start, limit),
        )
        return [InstanceRef(r["workflow"], r["id"]) for r in rows]

    def _mark(self, n: int) -> str:
        return "?"
