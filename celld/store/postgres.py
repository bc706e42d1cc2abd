"""PostgreSQL store (asyncpg) with group commit: the same rules as the SQLite store
(celld/store/base.py), for several celld nodes sharing one database (membership, leases
and takeovers: celld/store/pgnodes.py; what a node obeys itself: celld/store/lease.py).

Writes queue for one writer task, which takes everything queued while the previous
commit ran and commits it in one transaction on a pooled connection (a round trip per
statement kind, pipelined by asyncpg's executemany). Reads use the pool directly and never
hold a transaction open.

Every failure to reach or commit to the database (a restart, a network cut, a statement
timeout) becomes :class:`StoreUnavailable` and changes nothing; the pool replaces broken
connections, so the next commit after the database is back simply works. Creates of an id
that is taken are judged by the primary key (`INSERT ... ON CONFLICT DO NOTHING`), so two
nodes creating one id at once get one instance and one `DuplicateInstance`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from celld.engine.binary import store_bytes
from celld.engine.decisions import JournalText
from celld.store.base import (
    Fenced,
    InstanceRef,
    Loaded,
    NodeEvents,
    OwnedElsewhere,
    StoreUnavailable,
    Write,
    claim_each,
)
from celld.store.batch import (
    Gathered,
    GroupCommitWrites,
    Pending,
    Statements,
    WriteDone,
    fan_out,
    settle,
)
from celld.store.health import StoreHealth
from celld.store.lease import Lease
from celld.store.listing import SharedReads
from celld.store.pgnodes import (
    CHANNEL,
    DEFAULT_LEASE_MS,
    NodeMembership,
    log_payloads,
    session_settings,
)
from celld.store.pgschema import migrate
from celld.store.rows import (
    EVENT_COLUMNS,
    INSTANCE_COLUMNS,
    STEP_COLUMNS,
    event_from_row,
    instance_from_row,
    instance_row,
    journal_text,
    step_from_row,
)

log = logging.getLogger("celld.store")

MAX_BATCH = 1024
#: Seconds a statement or a connection attempt may take before the store counts as failing.
COMMAND_TIMEOUT_S = 10.0
#: Errors that mean "the database cannot be used right now" (reads); the writer treats
#: every Exception of a commit that way.
UNAVAILABLE = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)


def _upsert(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
    marks = ", ".join(f"${n}" for n in range(1, len(columns) + 1))
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


_INSTANCE_KEY = ("workflow", "id")
UPSERT_INSTANCE = _upsert("instances", INSTANCE_COLUMNS, _INSTANCE_KEY)
INSERT_INSTANCE = (
    f"INSERT INTO instances ({', '.join(INSTANCE_COLUMNS)}, owner) VALUES "
    f"({', '.join(f'${n}' for n in range(1, len(INSTANCE_COLUMNS) + 2))}) ON CONFLICT DO NOTHING"
)
UPSERT_STEP = _upsert("steps", STEP_COLUMNS, ("workflow", "instance_id", "type", "name", "count"))
UPSERT_EVENT = _upsert("events", EVENT_COLUMNS, ("workflow", "instance_id", "seq"))

_WIPE_STEPS = "DELETE FROM steps WHERE workflow = $1 AND instance_id = $2"
_WIPE_EVENTS = "DELETE FROM events WHERE workflow = $1 AND instance_id = $2"
_DELETE_LOG = "DELETE FROM instance_log WHERE workflow = $1 AND instance_id = $2"
_RECORD_TICK = (
    "INSERT INTO schedule_ticks (workflow, expression, tick) VALUES ($1, $2, $3) "
    "ON CONFLICT (workflow, expression) DO UPDATE SET tick = "
    "GREATEST(schedule_ticks.tick, EXCLUDED.tick)"
)
_DELETE_INSTANCE = "DELETE FROM instances WHERE workflow = $1 AND id = $2"
_DELETE_STEP = (
    "DELETE FROM steps WHERE workflow = $1 AND instance_id = $2 AND type = $3 AND name = $4 "
    "AND count = $5"
)
_DELETE_EVENT = "DELETE FROM events WHERE workflow = $1 AND instance_id = $2 AND seq = $3"
_RETAINED_UNTIL = "SELECT expires_at FROM instances WHERE workflow = $1 AND id = $2 FOR UPDATE"
#: Of the instances a commit writes, those this node does not own (locked: no claim moves
#: them until the commit ends).
_NOT_OWNED = (
    "SELECT i.workflow, i.id FROM instances i JOIN unnest($1::text[], $2::text[]) AS k(w, d) "
    "ON i.workflow = k.w AND i.id = k.d WHERE i.owner IS DISTINCT FROM $3 FOR UPDATE OF i"
)
#: Take the instance if nobody owns it or its owner is gone (reaped).
_CLAIM = (
    "UPDATE instances SET owner = $3 WHERE workflow = $1 AND id = $2 "
    "AND owner IS DISTINCT FROM $3 AND (owner IS NULL OR NOT EXISTS "
    "(SELECT 1 FROM celld_nodes n WHERE n.token = instances.owner)) RETURNING next_wake, runnable"
)
_INSERT_LOG = (
    "INSERT INTO instance_log (workflow, instance_id, timestamp, type, body) "
    "VALUES ($1, $2, $3, $4, $5)"
)
#: One statement sends every notification of a commit (each payload on the channel).
_NOTIFY_ALL = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload"
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
_PROBE = (
    "INSERT INTO celld_probe (id, at) VALUES (1, now()) "
    "ON CONFLICT (id) DO UPDATE SET at = EXCLUDED.at"
)


class PostgresStore(GroupCommitWrites, SharedReads):
    """Shared store: a pool of connections, one writer task doing group commits."""

    def __init__(self, dsn: str, *, pool_size: int = 4, lease_ms: int = DEFAULT_LEASE_MS) -> None:
        self.dsn = dsn
        self.pool_size = pool_size
        self.health = StoreHealth()
        #: Called in the writer before each commit; whatever it raises fails that commit as
        #: a real one would (tests inject faults through it, as with the SQLite store).
        self.fault: Callable[[], None] | None = None
        self.pool: asyncpg.Pool | None = None
        self._jobs: asyncio.Queue[Pending | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._open = False
        self.commits = 0
        self.rows_written = 0
        self.writer_restarts = 0
        self.nodes = NodeMembership(self, lease_ms)

    @property
    def node(self) -> int:
        """This node's fencing token."""
        return self.nodes.token

    @property
    def lease(self) -> Lease:
        """The node's lease as it obeys it itself: its cells consult it before every JS
        turn and every message that leaves (celld/store/lease.py)."""
        return self.nodes.lease

    async def open(self) -> None:
        try:
            # Migrations on a session of their own: waiting for another node's migration
            # (an advisory lock) or a long one must not meet the node sessions' timeouts.
            connection = await asyncpg.connect(self.dsn, timeout=COMMAND_TIMEOUT_S)
            try:
                await migrate(connection)
            finally:
                await connection.close()
            self.pool = await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=self.pool_size,
                command_timeout=COMMAND_TIMEOUT_S,
                timeout=COMMAND_TIMEOUT_S,
                server_settings=session_settings(
                    self.nodes.lease_ms, int(COMMAND_TIMEOUT_S * 1000), "node"
                ),
            )
            await self.nodes.join()
        except UNAVAILABLE as error:
            if self.pool is not None:
                self.pool.terminate()
                self.pool = None
            raise StoreUnavailable(
                f"cannot open the PostgreSQL store at {redact(self.dsn)}: {error}"
            ) from error
        self._start_writer()
        self._open = True

    async def close(self) -> None:
        self._open = False
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done():
            self._jobs.put_nowait(None)  # after every write queued so far
            with contextlib.suppress(BaseException):
                await writer
        await self.nodes.leave()
        if self.pool is not None:
            try:
                # graceful: waits for connections in use to come back, but not forever
                await asyncio.wait_for(self.pool.close(), COMMAND_TIMEOUT_S)
            except (TimeoutError, *UNAVAILABLE):
                self.pool.terminate()
        self.pool = None

    # -- writes --------------------------------------------------------------------------

    def _enqueue(self, pending: Pending) -> None:
        if not self._open:
            raise StoreUnavailable("the store is not open")
        if self._writer is None or self._writer.done():
            self.writer_restarts += 1
            log.error("the store's writer task had stopped; starting a new one")
            self._start_writer()
        self._jobs.put_nowait(pending)

    def write_soon(self, write: Write, done: WriteDone) -> None:
        """Each write is a share of its own here: the fence refuses a share as a whole,
        and one instance that moved to another node must not refuse the others."""
        pending = Pending(writes=[write])
        pending.done = lambda outcome: fan_out([(write, done)], outcome)
        try:
            self._enqueue(pending)
        except Exception as error:  # noqa: BLE001 - the caller learns it
            done(error)

    def _start_writer(self) -> None:
        """A writer with a queue of its own: a dead writer's queue is failed as a whole."""
        self._jobs = asyncio.Queue()
        self._writer = asyncio.get_running_loop().create_task(
            self._writer_main(self._jobs), name="celld-postgres-writer"
        )

    async def _writer_main(self, jobs: asyncio.Queue[Pending | None]) -> None:
        batch: list[Pending] = []
        try:
            while True:
                first = await jobs.get()
                if first is None:
                    return
                batch = [first]
                stopping = False
                while len(batch) < MAX_BATCH and not jobs.empty():
                    item = jobs.get_nowait()
                    if item is None:
                        stopping = True
                        break
                    batch.append(item)
                try:
                    outcome: dict[int, Any] | Exception = await self._commit(batch)
                except Exception as failure:  # noqa: BLE001 - every writer of the batch learns it
                    log.warning("commit of %d writes failed: %s", len(batch), failure)
                    outcome = StoreUnavailable(f"the store could not commit: {failure}")
                self._settle(batch, outcome)
                batch = []
                if stopping:
                    return
        except BaseException as fatal:
            stopped = StoreUnavailable(f"the store's writer stopped: {fatal!r}")
            while not jobs.empty():
                item = jobs.get_nowait()
                if item is not None:
                    batch.append(item)
            self._settle(batch, stopped)
            if isinstance(fatal, asyncio.CancelledError):
                raise
            # The task ends here; the next write starts a new writer (see `_submit`).
            log.error("the store's writer task stopped: %r", fatal)

    def _settle(self, batch: list[Pending], outcome: dict[int, Any] | Exception) -> None:
        settle(batch, outcome, self.health, self.on_committed)

    async def _commit(self, batch: list[Pending]) -> dict[int, Any]:
        if self.fault is not None:
            self.fault()
        if self.pool is None:
            raise StoreUnavailable("the store is not open")
        async with (
            self.pool.acquire(timeout=COMMAND_TIMEOUT_S) as connection,
            connection.transaction(),
        ):
            return await self._commit_in(connection, batch)

    @staticmethod
    async def _claim_id(connection: asyncpg.Connection, ref: InstanceRef, now: int) -> bool:
        """True if `ref` may be created: unused, or retained no longer (its rows go now)."""
        row = await connection.fetchrow(_RETAINED_UNTIL, ref.workflow, ref.id)
        if row is None:
            return True
        expires_at = row["expires_at"]
        if expires_at is None or expires_at > now:
            return False
        await PostgresStore._delete_instance(connection, ref)
        return True

    @staticmethod
    async def _delete_instance(connection: asyncpg.Connection, ref: InstanceRef) -> None:
        for sql in (_WIPE_STEPS, _WIPE_EVENTS, _DELETE_LOG, _DELETE_INSTANCE):
            await connection.execute(sql, ref.workflow, ref.id)

    async def _fence(
        self, connection: asyncpg.Connection, batch: list[Pending]
    ) -> set[InstanceRef]:
        """Check this node may commit at all (its lease, held until the commit ends), and
        return the instances of the batch it does not own: their writes are refused."""
        await self.nodes.hold(connection, self.node)
        refs = [w.ref for p in batch for w in p.writes if not w.changes.created]
        if not refs:
            return set()
        rows = await connection.fetch(
            _NOT_OWNED, [r.workflow for r in refs], [r.id for r in refs], self.node
        )
        return {InstanceRef(r["workflow"], r["id"]) for r in rows}

    async def _create(self, connection: asyncpg.Connection, write: Write) -> bool:
        """Insert a new instance, owned by this node; False if its id is taken."""
        state = write.changes.instance
        assert state is not None
        if not await self._claim_id(connection, write.ref, state.created_at):
            return False
        row = instance_row(state, write.next_wake, write.runnable, store_bytes)
        inserted = await connection.execute(INSERT_INSTANCE, *row, self.node) == "INSERT 0 1"
        self.rows_written += inserted
        return inserted

    async def _commit_in(
        self, connection: asyncpg.Connection, batch: list[Pending]
    ) -> dict[int, Any]:
        """Creates and deletions run as they come (each is judged against the rows);
        everything else is gathered by kind and written with one executemany each."""
        not_owned = await self._fence(connection, batch)
        skipped: dict[int, Any] = {}
        rows = Gathered(encode=store_bytes)  # (value columns are BYTEA: pgschema.py)
        logged: list[InstanceRef] = []  # instances whose log grows (or that go)
        for index, pending in enumerate(batch):
            if pending.probe:
                await connection.execute(_PROBE)
            if pending.ticks:
                await connection.executemany(_RECORD_TICK, pending.ticks)
            for ref in pending.expired:
                await self._claim_id(connection, ref, pending.now)
            moved = [w.ref for w in pending.writes if w.ref in not_owned]
            if moved:
                skipped[index] = Fenced(
                    f"instance {moved[0].workflow}/{moved[0].id} is owned by another node now"
                )
                continue
            for write in pending.writes:
                changes = write.changes
                if write.log or write.delete:
                    logged.append(write.ref)
                if write.delete:
                    await self._delete_instance(connection, write.ref)
                    continue
                if changes.created:
                    if not await self._create(connection, write):
                        skipped.setdefault(index, set()).add(write.ref)
                        continue
                elif changes.instance is not None:
                    rows.instances.append(
                        instance_row(changes.instance, write.next_wake, write.runnable, store_bytes)
                    )
                rows.add_history(write)
        for sql, values in rows.in_order(_STATEMENTS):
            await connection.executemany(sql, values)
        if logged:  # delivered at commit, only if it commits: wakes other nodes' subscribers
            await connection.execute(_NOTIFY_ALL, CHANNEL, log_payloads(self.node, logged))
        self.commits += 1
        self.rows_written += rows.rows_written
        return skipped

    # -- reads -----------------------------------------------------------------------------

    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self.pool is None:
            raise StoreUnavailable("the store is not open")
        try:
            return list(await self.pool.fetch(sql, *params, timeout=COMMAND_TIMEOUT_S))
        except UNAVAILABLE as error:
            raise StoreUnavailable(f"the store could not be read: {error}") from error

    async def load(self, ref: InstanceRef) -> Loaded | None:
        if self.pool is None:
            raise StoreUnavailable("the store is not open")
        key = (ref.workflow, ref.id)
        try:
            # One connection and one snapshot for the three reads (REPEATABLE READ, read
            # only): a commit landing between them cannot tear the instance.
            async with self.pool.acquire(timeout=COMMAND_TIMEOUT_S) as connection:
                rows, steps, events = await self._load_in(connection, key)
        except UNAVAILABLE as error:
            raise StoreUnavailable(f"the store could not be read: {error}") from error
        if not rows:
            return None
        return Loaded(
            instance_from_row(rows[0]),
            [step_from_row(r) for r in steps],
            [event_from_row(r) for r in events],
        )

    @staticmethod
    async def _load_in(
        connection: asyncpg.Connection, key: tuple[str, str]
    ) -> tuple[list[Any], list[Any], list[Any]]:
        async with connection.transaction(isolation="repeatable_read", readonly=True):
            rows = await connection.fetch(
                "SELECT * FROM instances WHERE workflow = $1 AND id = $2", *key
            )
            if not rows:
                return [], [], []
            steps = await connection.fetch(
                "SELECT * FROM steps WHERE workflow = $1 AND instance_id = $2 ORDER BY seq", *key
            )
            events = await connection.fetch(
                "SELECT * FROM events WHERE workflow = $1 AND instance_id = $2 ORDER BY seq", *key
            )
        return list(rows), list(steps), list(events)

    async def journal(self, ref: InstanceRef) -> JournalText:
        """From a full load (a run that starts with history dropped from memory)."""
        loaded = await self.load(ref)
        return journal_text(loaded.steps) if loaded is not None else JournalText()

    async def claim_many(
        self, refs: list[InstanceRef]
    ) -> dict[InstanceRef, Loaded | OwnedElsewhere]:
        """One claim per instance (`claim_each`): each is a transaction of its own that
        may take the instance over, and no journal comes with it (the run reads it)."""
        return await claim_each(self, refs)

    async def claim(self, ref: InstanceRef) -> Loaded | None:
        """Load the instance for this node to run or change: take it over if its owner is
        gone; OwnedElsewhere if a live node owns it."""
        if self.pool is None:
            raise StoreUnavailable("the store is not open")
        key = (ref.workflow, ref.id)
        token = self.node  # (the caller compares it with the lease's epoch afterwards)
        try:
            async with self.pool.acquire(timeout=COMMAND_TIMEOUT_S) as connection:
                async with connection.transaction():
                    await self.nodes.hold(connection, token)  # no claim under a lost token
                    taken = await connection.fetchrow(_CLAIM, *key, token)
                rows, steps, events = await self._load_in(connection, key)
        except UNAVAILABLE as error:
            raise StoreUnavailable(f"the store could not be read: {error}") from error
        if not rows:
            return None
        owner = rows[0]["owner"]
        if owner != token:
            raise OwnedElsewhere(ref, owner if owner is not None else 0)
        if taken is not None:
            self.nodes.takeovers += 1
            if self.nodes.events is not None:
                self.nodes.events.instances_claimed(
                    [(ref, taken["next_wake"], bool(taken["runnable"]))]
                )
        return Loaded(
            instance_from_row(rows[0]),
            [step_from_row(r) for r in steps],
            [event_from_row(r) for r in events],
        )

    async def serve(self, events: NodeEvents) -> None:
        self.nodes.serve(events)

    async def forward(self, owner: int, message: dict[str, Any]) -> Any:
        return await self.nodes.forward(owner, message)

    async def due(
        self, before_ms: int, limit: int, after: tuple[int, str, str] | None = None
    ) -> list[tuple[InstanceRef, int]]:
        start = after or (-(2**62), "", "")
        rows = await self._fetch(
            "SELECT workflow, id, next_wake FROM instances WHERE next_wake IS NOT NULL "
            "AND next_wake < $1 AND (next_wake, workflow, id) > ($2, $3, $4) AND owner = $6 "
            "ORDER BY next_wake, workflow, id LIMIT $5",
            (before_ms, *start, limit, self.node),
        )
        return [(InstanceRef(r["workflow"], r["id"]), r["next_wake"]) for r in rows]

    async def runnable(self, limit: int, after: InstanceRef | None = None) -> list[InstanceRef]:
        start = (after.workflow, after.id) if after is not None else ("", "")
        rows = await self._fetch(
            "SELECT workflow, id FROM instances WHERE runnable = 1 AND (workflow, id) > ($1, $2) "
            "AND owner = $4 ORDER BY workflow, id LIMIT $3",
            (*start, limit, self.node),
        )
        return [InstanceRef(r["workflow"], r["id"]) for r in rows]

    def _mark(self, n: int) -> str:
        return f"${n}"


def redact(dsn: str) -> str:
    """The DSN without its password, for messages and logs."""
    if "://" not in dsn or "@" not in dsn:
        return dsn
    scheme, rest = dsn.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}@{host}"
