"""One node's membership in a PostgreSQL store shared by several celld nodes.

* Lease: the node has a row in `celld_nodes` whose token is its fencing token, renewed
  every third of the lease on a connection of its own (never behind reaping, claiming or
  a commit). Every commit and every claim of the node first takes a KEY SHARE lock on
  that row and checks the lease is current, and the rows a commit writes must name the
  node as their owner, so the database itself refuses the writes of a node whose lease
  was taken over.
* The node fences itself as well (celld/store/lease.py): each renewal makes the lease
  valid until the database's `lease_until` minus a margin, tracked on the monotonic clock
  from the moment the renewal was sent. Past that, none of its cells runs a JS turn or
  sends anything until a renewal succeeds. A renewal that finds the row gone (the node was
  taken over) joins again under a new token, and every cell loaded under the old one is
  dropped and reloaded from the store. Failed renewals are logged at warning with the
  time left.
* Takeover: any node deletes rows whose lease ran out and sets their instances' owner to
  NULL in the same transaction; orphaned instances that need a run or have a deadline are
  then claimed in pages with `FOR UPDATE SKIP LOCKED`, so live nodes share them without
  waiting on each other. Reaping skips a row locked by a commit still in flight (`SKIP
  LOCKED`) instead of waiting for it.
* A node stopped in the middle of a transaction cannot stop the others: every session of
  a node has `idle_in_transaction_session_timeout` of one lease (the database ends the
  session and its locks go), a `lock_timeout` and a `statement_timeout`; the renewal's
  session has short ones. A takeover of a node stopped mid-commit therefore comes about
  one lease and a maintenance tick after it stopped.
* Wake-ups: `LISTEN celld` on a connection of its own; "orphans" (a node died or left),
  "inbox:<token>" (an operation for that node) and "reply:<token>" (its answer) wake nodes
  at once; the maintenance tick polls for the same things in case a notification was
  missed. "log:<token>:<instances>" is sent in every commit that logs events (the
  notification is delivered only if the commit is): it wakes the `subscribe()` readers of
  those instances on the other nodes, who read the new events from the log rows. The
  rows are the truth, the notification only wakes; when the listening session is
  (re)opened every reader is woken once, for what was sent while nobody listened.
* Forwarding: an operation received for an instance another live node owns is written to
  `celld_inbox`; the owner takes it (marking it taken), does it and writes the answer. If
  the owner dies before taking it, the sender withdraws it and the operation is done
  where the instance goes next; if it died after taking it, the outcome is unknown and
  the caller is told so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson

from celld.store.base import (
    Claimed,
    Fenced,
    InstanceRef,
    NodeEvents,
    NotDone,
    OutcomeUnknown,
    OwnedElsewhere,
    StoreUnavailable,
)
from celld.store.lease import Lease

if TYPE_CHECKING:
    from celld.store.postgres import PostgresStore

log = logging.getLogger("celld.nodes")

DEFAULT_LEASE_MS = 10_000
CLAIM_PAGE = 200
CHANNEL = "celld"
UNREACHABLE = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)
#: Seconds a forwarded operation may wait for its owner's answer before giving up.
FORWARD_TIMEOUT_S = 60.0
#: Renewals per lease period (and maintenance ticks: reaping, claiming, polling).
RENEWALS_PER_LEASE = 3
#: Share of the lease the node keeps in hand: it stops acting this long before the
#: database could reap it (covers the time between a check and an effect leaving).
MARGIN_SHARE = 0.2

#: The node's lease, locked against reaping until the transaction ends (KEY SHARE does not
#: block its renewal); NULL when the row is gone (the node was taken over).
_LEASE = "SELECT lease_until > clock_timestamp() FROM celld_nodes WHERE token = $1 FOR KEY SHARE"
#: Renew; returns the lease left on the database's clock (NULL: the row was taken over).
_RENEW = (
    "UPDATE celld_nodes SET lease_until = clock_timestamp() + $2 * interval '1 millisecond' "
    "WHERE token = $1 RETURNING extract(epoch FROM lease_until - clock_timestamp())"
)
_REGISTER = (
    "INSERT INTO celld_nodes (name, lease_until) "
    "VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond') "
    "RETURNING token, extract(epoch FROM lease_until - clock_timestamp()) AS remaining"
)
#: Nodes whose lease ran out, deleted with their instances orphaned in one statement. A
#: row locked by a transaction of its node still in flight (a commit's KEY SHARE) is
#: skipped, not waited for: its session ends within a lease (the idle timeout), and the
#: next tick reaps it.
_REAP = (
    "WITH dead AS (DELETE FROM celld_nodes WHERE token IN (SELECT token FROM celld_nodes "
    "WHERE lease_until < clock_timestamp() FOR UPDATE SKIP LOCKED) RETURNING token), "
    "freed AS (UPDATE instances SET owner = NULL WHERE owner IN (SELECT token FROM dead) "
    "RETURNING 1) SELECT count(*) FROM freed"
)
_CLAIM_ORPHANS = (
    "UPDATE instances i SET owner = $1 FROM ("
    "SELECT workflow, id FROM instances WHERE owner IS NULL "
    "AND (runnable = 1 OR next_wake IS NOT NULL) LIMIT $2 FOR UPDATE SKIP LOCKED"
    ") o WHERE i.workflow = o.workflow AND i.id = o.id "
    "RETURNING i.workflow, i.id, i.next_wake, i.runnable"
)


#: NOTIFY payloads must stay under 8000 bytes: more instances go in several notifications.
_PAYLOAD_MAX = 7000


def log_payloads(token: int, refs: list[InstanceRef]) -> list[str]:
    """The "log:<token>:<JSON [[workflow, id], ...]>" notifications that say node `token`
    committed events to the logs of `refs`."""
    payloads: list[str] = []
    head = f"log:{token}:"
    chunk: list[list[str]] = []
    size = 0
    for ref in dict.fromkeys(refs):
        pair = [ref.workflow, ref.id]
        length = len(orjson.dumps(pair)) + 1
        if chunk and size + length > _PAYLOAD_MAX:
            payloads.append(head + orjson.dumps(chunk).decode())
            chunk, size = [], 0
        chunk.append(pair)
        size += length
    if chunk:
        payloads.append(head + orjson.dumps(chunk).decode())
    return payloads


def read_log_payload(payload: str) -> tuple[int, list[InstanceRef]]:
    """The sender and the instances of a "log:" notification (see `log_payloads`)."""
    _, token, refs = payload.split(":", 2)
    return int(token), [InstanceRef(workflow, id_) for workflow, id_ in orjson.loads(refs)]


def session_settings(lease_ms: int, statement_timeout_ms: int, role: str) -> dict[str, str]:
    """Server settings of a node's sessions: a session left in a transaction by a node that
    stopped ends within a lease, and no statement waits on a lock for long."""
    return {
        "application_name": f"celld {role} {socket.gethostname()}:{os.getpid()}"[:63],
        "idle_in_transaction_session_timeout": str(lease_ms),
        "lock_timeout": str(max(100, lease_ms // 2)),
        "statement_timeout": str(statement_timeout_ms),
    }


def renewal_settings(lease_ms: int) -> dict[str, str]:
    """The renewal's session: it must answer within a fraction of the lease or fail."""
    return {
        **session_settings(lease_ms, max(200, lease_ms // RENEWALS_PER_LEASE), "lease"),
        "lock_timeout": str(max(50, lease_ms // 10)),
    }


def lease_from_environment() -> int:
    """CELLD_NODE_LEASE_MS: how long a silent node keeps its instances (default 10 s)."""
    value = os.environ.get("CELLD_NODE_LEASE_MS", "")
    if not value:
        return DEFAULT_LEASE_MS
    if not value.isdigit() or not 500 <= int(value) <= 600_000:
        raise ValueError(f"CELLD_NODE_LEASE_MS must be between 500 and 600000, not {value!r}")
    return int(value)


class OwnerGone(NotDone):
    """The owner died before taking the operation: it was withdrawn, nothing was done."""


class Moved(NotDone):
    """The node asked no longer owns the instance: ask again where it is now."""


class NodeMembership:
    def __init__(self, store: PostgresStore, lease_ms: int) -> None:
        self.store = store
        self.lease_ms = lease_ms
        self.token = 0
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.events: NodeEvents | None = None
        #: handlers of forwarded operations that name a kind ({"to": kind}): Durable
        #: Object calls and D1 queries (celld/objects/placement.py); answered concurrently
        self.routes: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._early_replies: set[int] = set()  # answers notified before their wait began
        #: run on each maintenance tick after reaping (objects' alarms are claimed there)
        self.tickers: list[Callable[[], Awaitable[None]]] = []
        #: given every "queue:" notification (celld/queues/pgqueues.py)
        self.on_queue: Callable[[str], None] | None = None
        #: what the node obeys itself: its cells consult it (celld/store/lease.py)
        self.lease = Lease(margin_s=lease_ms * MARGIN_SHARE / 1000)
        self._renewal: asyncpg.Connection | None = None  # the renewal's own session
        self._listener: asyncpg.Connection | None = None
        self._wake = asyncio.Event()
        self._renew_now = asyncio.Event()
        self._inbox_wanted = asyncio.Event()
        self._replies: dict[int, asyncio.Event] = {}
        self._renewer: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None  # maintenance: reaping, claiming
        self._inbox_task: asyncio.Task[None] | None = None
        self.takeovers = 0  # instances this node took over (metrics)

    @property
    def pool(self) -> asyncpg.Pool:
        if self.store.pool is None:
            raise StoreUnavailable("the store is not open")
        return self.store.pool

    @property
    def interval_s(self) -> float:
        return self.lease_ms / 1000 / RENEWALS_PER_LEASE

    # -- joining, the lease, leaving ---------------------------------------------------------

    async def _renewal_session(self) -> asyncpg.Connection:
        if self._renewal is None or self._renewal.is_closed():
            self._renewal = await asyncpg.connect(
                self.store.dsn,
                timeout=max(1.0, self.interval_s),
                server_settings=renewal_settings(self.lease_ms),
            )
        return self._renewal

    def _drop_renewal_session(self) -> None:
        renewal, self._renewal = self._renewal, None
        if renewal is not None and not renewal.is_closed():
            renewal.terminate()

    async def _register(self) -> None:
        """A new row, so a new fencing token (tokens are never reused): a new epoch of the
        lease, whose listeners drop everything loaded under the old token first."""
        session = await self._renewal_session()
        sent = time.monotonic()
        row = await session.fetchrow(
            _REGISTER, self.name, self.lease_ms, timeout=max(1.0, self.interval_s)
        )
        self.token = row["token"]
        self.lease.new_epoch(self.token)
        self.lease.renewed(sent, float(row["remaining"]))

    async def join(self) -> None:
        await self._register()
        log.info("joined the shared store as node %d (lease %d ms)", self.token, self.lease_ms)
        loop = asyncio.get_running_loop()
        self._renewer = loop.create_task(self._renew_loop(), name="celld-lease")
        self._task = loop.create_task(self._maintain_loop(), name="celld-nodes")

    async def hold(self, connection: asyncpg.Connection, token: int) -> None:
        """In a transaction: lock this node's row against reaping until it ends, and raise
        Fenced unless the lease of `token` is current (a claim or commit may go on)."""
        current = await connection.fetchval(_LEASE, token)
        if current is None:
            self.lease_lost(token)
            raise Fenced(f"node {token} was taken over by other nodes (its lease ran out)")
        if not current:
            self.lease.lapse("the database found it over")
            self._renew_now.set()
            raise Fenced(f"node {token}'s lease ran out; it commits again once renewed")

    def lease_lost(self, token: int | None = None) -> None:
        """This node's row is gone: it was taken over. Nothing it holds may act any more;
        the renewal joins again at once (new token)."""
        if token is None or token == self.token:
            self.lease.lapse("taken over by other nodes")
            self._renew_now.set()

    async def leave(self) -> None:
        """Stop, and hand every instance of this node to the others at once."""
        self.lease.close()
        for task in (self._renewer, self._task, self._inbox_task, *self._answering):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        for connection in (self._listener, self._renewal):
            if connection is not None:
                with contextlib.suppress(Exception):
                    await connection.close(timeout=5)
        if self.token and self.store.pool is not None:
            try:
                async with self.pool.acquire(timeout=10) as connection, connection.transaction():
                    await connection.execute("DELETE FROM celld_nodes WHERE token = $1", self.token)
                    await connection.execute(
                        "UPDATE instances SET owner = NULL WHERE owner = $1", self.token
                    )
                    await connection.execute(
                        "UPDATE do_objects SET owner = NULL WHERE owner = $1", self.token
                    )
                    await connection.execute(
                        "UPDATE queue_consumers SET owner = NULL WHERE owner = $1", self.token
                    )
                    await connection.execute("SELECT pg_notify($1, 'orphans')", CHANNEL)
            except Exception as error:  # noqa: BLE001 - the lease runs out instead
                log.warning("could not hand this node's instances over on leaving: %s", error)

    async def _renew_loop(self) -> None:
        """Renew every third of the lease; after a failure, again sooner (while time is
        left) and say how much is left."""
        while True:
            delay = self.interval_s
            self._renew_now.clear()  # (before: a wish made during the renewal is kept)
            try:
                await self._renew()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - reported with the time left
                self._drop_renewal_session()
                left = self.lease.time_left()
                if left > 0:
                    log.warning(
                        "node %d could not renew its lease (%s): %.2f s left before its cells stop",
                        self.token,
                        error or type(error).__name__,
                        left,
                    )
                    delay = min(delay, max(0.05, left / 2))
                else:
                    log.warning(
                        "node %d could not renew its lease (%s): no time left, its cells "
                        "are stopped until it renews",
                        self.token,
                        error or type(error).__name__,
                    )
                    delay = delay / 2
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._renew_now.wait(), delay)

    async def _renew(self) -> None:
        session = await self._renewal_session()
        sent = time.monotonic()
        remaining = await session.fetchval(
            _RENEW, self.token, self.lease_ms, timeout=max(1.0, self.interval_s)
        )
        if remaining is not None:
            self.lease.renewed(sent, float(remaining))
            return
        old = self.token
        self.lease.lapse("taken over by other nodes")
        await self._register()
        log.warning(
            "node %d lost its lease (taken over by others); rejoined as node %d", old, self.token
        )
        self._wake.set()  # claim what is orphaned under the new token at once

    async def _maintain_loop(self) -> None:
        while True:
            self._wake.clear()  # (before: a wake-up during the tick brings the next at once)
            try:
                await self._maintain()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the store's health reports outages
                log.debug("a maintenance tick of the node failed: %s", error)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def _maintain(self) -> None:
        await self._listen()
        await self._reap()
        if self.events is not None:
            await self.claim_orphans()
        for ticker in list(self.tickers):
            try:
                await ticker()
            except Exception as error:  # noqa: BLE001 - tried again on the next tick
                log.debug("a maintenance task of the node failed: %s", error)
        if self._inbox_task is not None:
            self._inbox_wanted.set()

    async def _reap(self) -> None:
        """Delete nodes whose lease ran out and orphan their instances (one statement)."""
        orphaned = await self.pool.fetchval(_REAP)
        if orphaned:
            log.warning("took %d instances from nodes whose lease ran out", orphaned)
            await self.pool.execute("SELECT pg_notify($1, 'orphans')", CHANNEL)

    async def claim_orphans(self) -> int:
        """Take over orphaned instances that need a run or have a deadline, a page at a time;
        SKIP LOCKED lets every live node claim its share at once. Each page is claimed with
        this node's lease held (Fenced if it is not current)."""
        total = 0
        token = self.token
        while True:
            async with self.pool.acquire() as connection, connection.transaction():
                await self.hold(connection, token)
                rows = await connection.fetch(_CLAIM_ORPHANS, token, CLAIM_PAGE)
            if not rows:
                return total
            total += len(rows)
            self.takeovers += len(rows)
            claimed: list[Claimed] = [
                (InstanceRef(r["workflow"], r["id"]), r["next_wake"], bool(r["runnable"]))
                for r in rows
            ]
            if self.events is not None:
                self.events.instances_claimed(claimed)
            if len(rows) < CLAIM_PAGE:
                return total

    # -- notifications ----------------------------------------------------------------------

    async def _listen(self) -> None:
        if self._listener is not None and not self._listener.is_closed():
            return
        self._listener = await asyncpg.connect(
            self.store.dsn,
            timeout=10,
            server_settings={"application_name": f"celld listen {self.name}"[:63]},
        )
        await self._listener.add_listener(CHANNEL, self._notified)
        self._wake.set()  # anything sent while nobody listened is polled for now
        if self.events is not None:
            self.events.log_written(None)  # and every subscriber reads its log again

    def _notified(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        if payload.startswith("log:"):
            try:
                sender, refs = read_log_payload(payload)
            except (ValueError, orjson.JSONDecodeError):
                log.warning("ignored a malformed log notification: %.200s", payload)
                return
            if sender != self.token and self.events is not None:
                self.events.log_written(refs)  # (its own commits woke this node's readers)
        elif payload.startswith("queue:"):
            if self.on_queue is not None:
                self.on_queue(payload)
        elif payload == "orphans":
            self._wake.set()
        elif payload == f"inbox:{self.token}":
            self._inbox_wanted.set()
        elif payload.startswith(f"reply:{self.token}:"):
            seq = int(payload.rsplit(":", 1)[1])
            waiter = self._replies.get(seq)
            if waiter is not None:
                waiter.set()
            else:  # answered before the sender began to wait: it looks here first
                if len(self._early_replies) > 10_000:  # (senders that gave up long ago)
                    self._early_replies.clear()
                self._early_replies.add(seq)

    # -- forwarded operations: the owner's side ----------------------------------------------

    def serve(self, events: NodeEvents) -> None:
        """Hand takeovers and forwarded operations to `events` (again to a new one when
        the Worker is reloaded: the inbox loop already running serves it)."""
        self.events = events
        self._start_inbox()
        self._wake.set()

    def route(self, kind: str, handler: Callable[[dict[str, Any]], Awaitable[Any]]) -> None:
        """Answer forwarded operations `{"to": kind, ...}` with `handler` (the inbox is read
        from now on, even with no workflow to serve)."""
        self.routes[kind] = handler
        self._start_inbox()

    def _start_inbox(self) -> None:
        if self._inbox_task is None or self._inbox_task.done():
            self._inbox_task = asyncio.get_running_loop().create_task(
                self._inbox_loop(), name="celld-inbox"
            )
            self._inbox_wanted.set()

    async def _inbox_loop(self) -> None:
        while True:
            await self._inbox_wanted.wait()
            self._inbox_wanted.clear()
            try:
                await self._take_inbox()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - polled again on the next tick
                log.debug("reading the inbox failed: %s", error)

    async def _take_inbox(self) -> None:
        while True:
            rows = await self.pool.fetch(
                "UPDATE celld_inbox SET taken = true WHERE seq IN (SELECT seq FROM celld_inbox "
                "WHERE target = $1 AND NOT taken ORDER BY seq LIMIT 100 FOR UPDATE SKIP LOCKED) "
                "RETURNING seq, sender, body",
                self.token,
            )
            if not rows:
                return
            for row in sorted(rows, key=lambda r: r["seq"]):
                message = orjson.loads(row["body"])
                if message.get("to") in self.routes:
                    # An object or a database orders its own calls (its input gate): one
                    # slow call must not hold up the others.
                    task = asyncio.get_running_loop().create_task(
                        self._answer(row["seq"], row["sender"], message)
                    )
                    self._answering.add(task)
                    task.add_done_callback(self._answered)
                else:
                    await self._answer(row["seq"], row["sender"], message)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._answering.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("answering a forwarded operation failed: %s", task.exception())

    async def _answer(self, seq: int, sender: int, message: dict[str, Any]) -> None:
        route = self.routes.get(message.get("to"))  # type: ignore[arg-type]
        run = route if route is not None else self.events.run_forwarded if self.events else None
        try:
            if run is None:
                raise RuntimeError(f"this node serves no {message.get('to')!r} operations")
            reply: dict[str, Any] = {"ok": await run(message)}
        except OwnedElsewhere:
            reply = {"moved": True}
        except Exception as error:  # noqa: BLE001 - the sender raises it to its caller
            reply = {"error": str(error), "name": getattr(error, "js_name", "Error")}
        await self.pool.execute(  # one statement: the answer and its wake-up commit together
            "WITH answered AS (UPDATE celld_inbox SET reply = $2 WHERE seq = $1) "
            "SELECT pg_notify($3, $4)",
            seq,
            orjson.dumps(reply).decode(),
            CHANNEL,
            f"reply:{sender}:{seq}",
        )

    # -- forwarded operations: the sender's side ---------------------------------------------

    async def forward(self, owner: int, message: dict[str, Any]) -> dict[str, Any]:
        """Send `message` to node `owner` and wait for its reply ({"ok"} or {"error"});
        raises OwnerGone (withdrawn, not done), Moved, OutcomeUnknown or StoreUnavailable."""
        try:
            seq = await self.pool.fetchval(  # one statement: the operation and its wake-up
                "WITH sent AS (INSERT INTO celld_inbox (target, sender, body) "
                "VALUES ($1, $2, $3) RETURNING seq) "
                "SELECT seq FROM sent, pg_notify($4, $5)",
                owner,
                self.token,
                orjson.dumps(message).decode(),
                CHANNEL,
                f"inbox:{owner}",
            )
        except UNREACHABLE as error:
            raise StoreUnavailable(
                f"could not hand the operation to node {owner}: {error}"
            ) from error
        waiter = self._replies[seq] = asyncio.Event()
        if seq in self._early_replies:
            self._early_replies.discard(seq)
            waiter.set()
        try:
            return await self._await_reply(seq, owner, waiter)
        except UNREACHABLE as error:
            raise OutcomeUnknown(
                f"lost the database while node {owner} was asked to do the operation "
                f"({error}): it may or may not have been done; read the instance's status "
                "before retrying"
            ) from error
        finally:
            self._replies.pop(seq, None)

    async def _await_reply(self, seq: int, owner: int, waiter: asyncio.Event) -> dict[str, Any]:
        """Wait (woken by NOTIFY, polling every 0.5 s) for the owner's answer to `seq`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FORWARD_TIMEOUT_S
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(waiter.wait(), 0.5)
            waiter.clear()
            try:
                # The answer, taken in one statement if it is there.
                answer = await self.pool.fetchval(
                    "DELETE FROM celld_inbox WHERE seq = $1 AND reply IS NOT NULL RETURNING reply",
                    seq,
                )
                row = None
                if answer is None:
                    row = await self.pool.fetchrow(
                        "SELECT taken, reply, EXISTS (SELECT 1 FROM celld_nodes WHERE token = $2) "
                        "AS alive FROM celld_inbox WHERE seq = $1",
                        seq,
                        owner,
                    )
            except UNREACHABLE:
                if loop.time() < deadline:
                    continue  # the database is away: the answer waits there for us
                raise
            if answer is None and row is not None and row["reply"] is not None:
                answer = row["reply"]  # (answered between the two reads)
                await self.pool.execute("DELETE FROM celld_inbox WHERE seq = $1", seq)
            if answer is not None:
                reply: dict[str, Any] = orjson.loads(answer)
                if reply.get("moved"):
                    raise Moved()
                return reply
            if row is not None and row["alive"] and loop.time() < deadline:
                continue
            withdrawn = await self.pool.fetchval(
                "DELETE FROM celld_inbox WHERE seq = $1 AND NOT taken RETURNING seq", seq
            )
            if withdrawn is not None:
                raise OwnerGone()
            await self.pool.execute("DELETE FROM celld_inbox WHERE seq = $1", seq)
            raise OutcomeUnknown(
                f"node {owner}, which runs this instance, took the operation but did not "
                "answer (it died or is cut off): it may or may not have been done; read the "
                "instance's status before retrying"
            )
