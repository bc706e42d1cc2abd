"""One node's membership in a PostgreSQL store shared by several celld nodes.

* Lease: the node has a row in `celld_nodes` whose token is its fencing token, renewed
  every third of the lease. Every commit of the node first takes a KEY SHARE lock on that
  row and checks the lease is current, and the rows it writes must name the node as their
  owner, so the database itself refuses the writes of a node whose lease was taken over.
* Takeover: any node deletes rows whose lease ran out (the KEY SHARE lock of a commit in
  flight makes that wait) and sets their instances' owner to NULL in the same transaction;
  orphaned instances that need a run or have a deadline are then claimed in pages with
  `FOR UPDATE SKIP LOCKED`, so live nodes share them without waiting on each other.
* Wake-ups: `LISTEN celld` on a connection of its own; "orphans" (a node died or left),
  "inbox:<token>" (an operation for that node) and "reply:<token>" (its answer) wake nodes
  at once; the lease tick polls for the same things in case a notification was missed.
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
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson

from celld.store.base import (
    Claimed,
    InstanceRef,
    NodeEvents,
    NotDone,
    OutcomeUnknown,
    OwnedElsewhere,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from celld.store.postgres import PostgresStore

log = logging.getLogger("celld.nodes")

DEFAULT_LEASE_MS = 10_000
CLAIM_PAGE = 200
CHANNEL = "celld"
UNREACHABLE = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)
#: Seconds a forwarded operation may wait for its owner's answer before giving up.
FORWARD_TIMEOUT_S = 60.0


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
        self._lease_valid_until = 0.0  # loop time
        self._rejoin = False
        self._listener: asyncpg.Connection | None = None
        self._wake = asyncio.Event()
        self._inbox_wanted = asyncio.Event()
        self._replies: dict[int, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        self._inbox_task: asyncio.Task[None] | None = None
        self.takeovers = 0  # instances this node took over (metrics)

    @property
    def pool(self) -> asyncpg.Pool:
        if self.store.pool is None:
            raise StoreUnavailable("the store is not open")
        return self.store.pool

    # -- joining, the lease, leaving ---------------------------------------------------------

    async def _register(self) -> None:
        """A new row, so a new fencing token (tokens are never reused)."""
        self.token = await self.pool.fetchval(
            "INSERT INTO celld_nodes (name, lease_until) "
            "VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond') RETURNING token",
            self.name,
            self.lease_ms,
        )
        self._rejoin = False

    async def join(self) -> None:
        await self._register()
        log.info("joined the shared store as node %d (lease %d ms)", self.token, self.lease_ms)
        self._task = asyncio.get_running_loop().create_task(self._tick_loop(), name="celld-lease")

    def lease_lost(self) -> None:
        """A commit found this node's row gone: it was taken over; join again (new token)."""
        self._rejoin = True
        self._wake.set()

    async def leave(self) -> None:
        """Stop, and hand every instance of this node to the others at once."""
        for task in (self._task, self._inbox_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close(timeout=5)
        if self.token and self.store.pool is not None:
            try:
                async with self.pool.acquire(timeout=10) as connection, connection.transaction():
                    await connection.execute(
                        "UPDATE instances SET owner = NULL WHERE owner = $1", self.token
                    )
                    await connection.execute("DELETE FROM celld_nodes WHERE token = $1", self.token)
                    await connection.execute("SELECT pg_notify($1, 'orphans')", CHANNEL)
            except Exception as error:  # noqa: BLE001 - the lease runs out instead
                log.warning("could not hand this node's instances over on leaving: %s", error)

    async def _tick_loop(self) -> None:
        interval = self.lease_ms / 3000
        while True:
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the store's health reports outages
                log.debug("lease tick failed: %s", error)
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    async def _tick(self) -> None:
        if self._rejoin:
            old = self.token
            await self._register()
            log.warning(
                "node %d lost its lease (taken over by others); rejoined as node %d",
                old,
                self.token,
            )
        else:
            renewed = await self.pool.fetchval(
                "UPDATE celld_nodes SET lease_until = clock_timestamp() + "
                "$2 * interval '1 millisecond' WHERE token = $1 RETURNING token",
                self.token,
                self.lease_ms,
            )
            if renewed is None:
                self._rejoin = True
                return await self._tick()
        await self._listen()
        await self._reap()
        if self.events is not None:
            await self.claim_orphans()
            self._inbox_wanted.set()

    async def _reap(self) -> None:
        """Delete nodes whose lease ran out and orphan their instances (one transaction)."""
        orphaned = await self.pool.fetchval(
            "WITH dead AS (DELETE FROM celld_nodes WHERE lease_until < clock_timestamp() "
            "RETURNING token), freed AS (UPDATE instances SET owner = NULL WHERE owner IN "
            "(SELECT token FROM dead) RETURNING 1) SELECT count(*) FROM freed"
        )
        if orphaned:
            log.warning("took %d instances from nodes whose lease ran out", orphaned)
            await self.pool.execute("SELECT pg_notify($1, 'orphans')", CHANNEL)

    async def claim_orphans(self) -> int:
        """Take over orphaned instances that need a run or have a deadline, a page at a time;
        SKIP LOCKED lets every live node claim its share at once."""
        total = 0
        while True:
            rows = await self.pool.fetch(
                "UPDATE instances i SET owner = $1 FROM ("
                "SELECT workflow, id FROM instances WHERE owner IS NULL "
                "AND (runnable = 1 OR next_wake IS NOT NULL) LIMIT $2 FOR UPDATE SKIP LOCKED"
                ") o WHERE i.workflow = o.workflow AND i.id = o.id "
                "RETURNING i.workflow, i.id, i.next_wake, i.runnable",
                self.token,
                CLAIM_PAGE,
            )
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
        self._listener = await asyncpg.connect(self.store.dsn, timeout=10)
        await self._listener.add_listener(CHANNEL, self._notified)
        self._wake.set()  # anything sent while nobody listened is polled for now

    def _notified(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        if payload == "orphans":
            self._wake.set()
        elif payload == f"inbox:{self.token}":
            self._inbox_wanted.set()
        elif payload.startswith(f"reply:{self.token}:"):
            waiter = self._replies.get(int(payload.rsplit(":", 1)[1]))
            if waiter is not None:
                waiter.set()

    # -- forwarded operations: the owner's side ----------------------------------------------

    def serve(self, events: NodeEvents) -> None:
        self.events = events
        self._inbox_task = asyncio.get_running_loop().create_task(
            self._inbox_loop(), name="celld-inbox"
        )
        self._wake.set()

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
                await self._answer(row["seq"], row["sender"], orjson.loads(row["body"]))

    async def _answer(self, seq: int, sender: int, message: dict[str, Any]) -> None:
        assert self.events is not None
        try:
            reply: dict[str, Any] = {"ok": await self.events.run_forwarded(message)}
        except OwnedElsewhere:
            reply = {"moved": True}
        except Exception as error:  # noqa: BLE001 - the sender raises it to its caller
            reply = {"error": str(error), "name": getattr(error, "js_name", "Error")}
        async with self.pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "UPDATE celld_inbox SET reply = $2 WHERE seq = $1",
                seq,
                orjson.dumps(reply).decode(),
            )
            await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, f"reply:{sender}:{seq}")

    # -- forwarded operations: the sender's side ---------------------------------------------

    async def forward(self, owner: int, message: dict[str, Any]) -> dict[str, Any]:
        """Send `message` to node `owner` and wait for its reply ({"ok"} or {"error"});
        raises OwnerGone (withdrawn, not done), Moved, OutcomeUnknown or StoreUnavailable."""
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                seq = await connection.fetchval(
                    "INSERT INTO celld_inbox (target, sender, body) VALUES ($1, $2, $3) "
                    "RETURNING seq",
                    owner,
                    self.token,
                    orjson.dumps(message).decode(),
                )
                await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, f"inbox:{owner}")
        except UNREACHABLE as error:
            raise StoreUnavailable(
                f"could not hand the operation to node {owner}: {error}"
            ) from error
        waiter = self._replies[seq] = asyncio.Event()
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
            if row is not None and row["reply"] is not None:
                await self.pool.execute("DELETE FROM celld_inbox WHERE seq = $1", seq)
                reply: dict[str, Any] = orjson.loads(row["reply"])
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
