"""Queues on several nodes sharing one PostgreSQL store.

Messages are rows of ``queue_messages`` (migration 7, celld/store/pgschema.py): any node
inserts what its producers send, in one transaction per send, and the send resolves once
it commits, so a `kill -9` of any node loses no acknowledged send. The same transaction
sends ``NOTIFY celld, 'queue:<seqs>:<queue>'`` (delivered only if the commit is), which
wakes the queue's owner at once; the owner also reads its queues again every few seconds
(celld/queues/placement.py), so a missed notification only delays a message.

A queue's consumer runs on one node at a time: the node whose fencing token the queue's
``queue_consumers`` row names. Every node with a consumer for the queue tries to claim it
on each maintenance tick (the membership's tickers, celld/store/pgnodes.py) exactly as a
Durable Object is claimed (celld/objects/placement.py): the row is free when it names no
node, or a node whose lease ran out and was reaped. The owner reads the queue's rows, and
delivers and settles as one process does (`max_batch_size`, `max_batch_timeout`,
`max_concurrency`, retries and `delaySeconds` hold for the cluster). A settle holds the
node's lease for its transaction and checks the row still names the node; otherwise
nothing is written (`QueueFenced`) and the node stops consuming the queue. Before each
batch is handed over, the owner waits while its lease is lapsed and checks it still holds
the queue under the same token (`may_deliver`), as its cells obey the lease. So a batch is
handed to a second consumer only after the first one's lease ran out, and is never settled
by two. A node that leaves frees its queues at once (`NodeMembership.leave`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from celld.queues.placement import QueueFenced
from celld.queues.store import (
    Moved,
    NewMessage,
    Retried,
    SharedCommits,
    StoredMessage,
    metrics_of,
)
from celld.store.base import Fenced, StoreUnavailable
from celld.store.pgnodes import CHANNEL, UNREACHABLE

if TYPE_CHECKING:
    from celld.queues.broker import QueueBroker
    from celld.store.postgres import PostgresStore

log = logging.getLogger("celld.queues")

_COLUMNS = "seq, queue, id, timestamp_ms, content_type, visible_at, failed, length(body)"
_INSERT = (
    "INSERT INTO queue_messages (queue, id, timestamp_ms, content_type, body, visible_at) "
    "SELECT $1, m.id, m.ts, m.ct, m.body, m.at FROM unnest($2::text[], $3::bigint[], "
    "$4::text[], $5::bytea[], $6::bigint[]) WITH ORDINALITY AS m(id, ts, ct, body, at, n) "
    "ORDER BY m.n RETURNING seq"
)
_MOVE = (
    "WITH gone AS (DELETE FROM queue_messages WHERE seq = $1 "
    "RETURNING id, timestamp_ms, content_type, body) "
    "INSERT INTO queue_messages (queue, id, timestamp_ms, content_type, body, visible_at) "
    "SELECT $2, id, timestamp_ms, content_type, body, $3 FROM gone RETURNING seq"
)
_CLAIM = (
    "INSERT INTO queue_consumers (queue, owner) VALUES ($1, $2) "
    "ON CONFLICT (queue) DO UPDATE SET owner = EXCLUDED.owner "
    "WHERE queue_consumers.owner IS NULL OR queue_consumers.owner = EXCLUDED.owner "
    "OR NOT EXISTS (SELECT 1 FROM celld_nodes n WHERE n.token = queue_consumers.owner) "
    "RETURNING owner"
)


def _message(row: Any) -> StoredMessage:
    return StoredMessage(*(row[i] for i in range(8)))


#: seqs per notification (a NOTIFY payload must stay under 8000 bytes)
_SEQS_PER_NOTIFICATION = 400


def notifications(queue: str, seqs: list[int]) -> list[str]:
    step = _SEQS_PER_NOTIFICATION
    return [
        f"queue:{','.join(map(str, seqs[i : i + step]))}:{queue}" for i in range(0, len(seqs), step)
    ]


def read_notification(payload: str) -> tuple[str, list[int]]:
    _, seqs, queue = payload.split(":", 2)
    return queue, [int(s) for s in seqs.split(",") if s]


class PgQueueStore:
    """The queue store's operations (celld/queues/store.py) on ``queue_messages``."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.commits = SharedCommits(self._insert)

    @property
    def _pool(self) -> Any:
        if self.store.pool is None:
            raise StoreUnavailable("the shared store is not open")
        return self.store.pool

    async def open(self) -> PgQueueStore:
        return self  # the node's store is opened (and closed) by its Service

    async def close(self) -> None:
        await self.commits.drain()

    async def add(self, messages: list[NewMessage]) -> list[int]:
        """Store messages, all or none; their seqs once committed (in one transaction with
        the sends waiting on this node at the same time, as on SQLite)."""
        return await self.commits.add(messages)

    async def _insert(self, messages: list[NewMessage]) -> list[int]:
        by_queue: defaultdict[str, list[NewMessage]] = defaultdict(list)
        for m in messages:
            by_queue[m.queue].append(m)
        seqs: dict[int, int] = {}  # id(message) -> seq
        async with self._pool.acquire() as connection, connection.transaction():
            for queue, group in by_queue.items():
                rows = await connection.fetch(
                    _INSERT,
                    queue,
                    [m.id for m in group],
                    [m.timestamp_ms for m in group],
                    [m.content_type for m in group],
                    [m.body for m in group],
                    [m.visible_at for m in group],
                )
                new = [int(r["seq"]) for r in rows]
                seqs.update(zip(map(id, group), new, strict=True))
                for payload in notifications(queue, new):
                    await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)
        return [seqs[id(m)] for m in messages]

    async def index(self, queue: str | None = None, after: int = 0) -> list[StoredMessage]:
        if queue is None:
            rows = await self._pool.fetch(
                f"SELECT {_COLUMNS} FROM queue_messages WHERE seq > $1 ORDER BY seq", after
            )
        else:
            rows = await self._pool.fetch(
                f"SELECT {_COLUMNS} FROM queue_messages WHERE queue = $1 AND seq > $2 ORDER BY seq",
                queue,
                after,
            )
        return [_message(r) for r in rows]

    async def rows(self, queue: str, seqs: list[int]) -> list[StoredMessage]:
        if not seqs:
            return []
        rows = await self._pool.fetch(
            f"SELECT {_COLUMNS} FROM queue_messages WHERE queue = $1 AND seq = ANY($2::bigint[]) "
            "ORDER BY seq",
            queue,
            seqs,
        )
        return [_message(r) for r in rows]

    async def bodies(self, seqs: list[int]) -> dict[int, bytes]:
        rows = await self._pool.fetch(
            "SELECT seq, body FROM queue_messages WHERE seq = ANY($1::bigint[])", seqs
        )
        return {int(r["seq"]): bytes(r["body"]) for r in rows}

    async def stats(self, queue: str) -> dict[str, int]:
        row = await self._pool.fetchrow(
            "SELECT count(*), coalesce(sum(length(body)), 0), coalesce(min(timestamp_ms), 0) "
            "FROM queue_messages WHERE queue = $1",
            queue,
        )
        return metrics_of(int(row[0]), int(row[1]), int(row[2]))

    async def settle(
        self, queue: str, deleted: Iterable[int], retried: Iterable[Retried], moved: Iterable[Moved]
    ) -> list[int]:
        """One batch's outcome in one transaction, only while this node's lease is
        current and `queue`'s row names it (QueueFenced otherwise: nothing is written)."""
        nodes = self.store.nodes
        token = nodes.token
        deleted, retried, moved = list(deleted), list(retried), list(moved)
        new: list[int] = []
        async with self._pool.acquire() as connection, connection.transaction():
            try:
                await nodes.hold(connection, token)
            except Fenced as error:
                raise QueueFenced(str(error)) from None
            owner = await connection.fetchval(
                "SELECT owner FROM queue_consumers WHERE queue = $1 FOR SHARE", queue
            )
            if owner != token:
                raise QueueFenced(f"queue {queue!r} is consumed by node {owner} now")
            if deleted:
                await connection.execute(
                    "DELETE FROM queue_messages WHERE seq = ANY($1::bigint[])", deleted
                )
            if retried:
                await connection.executemany(
                    "UPDATE queue_messages SET visible_at = $2, failed = $3 WHERE seq = $1",
                    retried,
                )
            for seq, to, at in moved:
                new.append(int(await connection.fetchval(_MOVE, seq, to, at)))
            by_queue: defaultdict[str, list[int]] = defaultdict(list)
            for (_, to, _), seq in zip(moved, new, strict=True):
                by_queue[to].append(seq)
            for to, seqs in by_queue.items():
                for payload in notifications(to, seqs):
                    await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)
        return new


class NodePlacement:
    """Which queues this node consumes (module docstring)."""

    shared = True
    #: a node owns no queue until it claims one: nothing is read when the broker opens
    claimed = True

    def __init__(self, store: PostgresStore, broker: QueueBroker) -> None:
        self.store = store
        self.broker = broker
        self.held: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._ticking = asyncio.Lock()
        #: the node's token the queues in `held` were claimed under
        self._token = 0

    def owns(self, queue: str) -> bool:
        return queue in self.held

    def arrived(self, queue: str, seqs: list[int]) -> None:
        """Nothing to do: the insert's notification tells the owner."""

    def lost(self, queue: str) -> None:
        self.held.discard(queue)

    async def may_deliver(self, queue: str) -> bool:
        """Before a batch is handed to the consumer: wait while the node's lease is lapsed
        (it obeys its lease as its cells do), then only if the queue is still held under
        the token it was claimed with (a node taken over meanwhile delivers nothing)."""
        lease = self.store.nodes.lease
        await lease.wait_valid()
        return queue in self.held and lease.epoch == self._token

    def notified(self, payload: str) -> None:
        """A `queue:` notification: rows committed by some node (this one included)."""
        try:
            queue, seqs = read_notification(payload)
        except ValueError:
            log.warning("ignored a malformed queue notification: %.200s", payload)
            return
        if queue in self.held:
            self._spawn(self.broker.adopt(queue, seqs))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def tick(self) -> None:
        """Claim each queue this node has a consumer for; start or stop consuming as the
        claims say (a maintenance tick of the node, and once at start)."""
        async with self._ticking:
            nodes = self.store.nodes
            token = nodes.token
            if token != self._token:
                # taken over and joined again (a new token): what was held under the old
                # one is read again from the store once claimed anew
                for queue in sorted(self.held):
                    self.held.discard(queue)
                    log.warning(
                        "queue %s: not consumed on this node any more (it was taken over)", queue
                    )
                    await self.broker.drop(queue)
                self._token = token
            for queue in sorted(self.broker.consumers):
                try:
                    async with self._pool().acquire() as connection, connection.transaction():
                        await nodes.hold(connection, token)
                        owner = await connection.fetchval(_CLAIM, queue, token)
                except Fenced:
                    owner = None
                except UNREACHABLE as error:
                    log.debug("queue %s: could not claim its consumer: %s", queue, error)
                    continue
                if owner == token and queue not in self.held:
                    self.held.add(queue)
                    log.info("queue %s: consumed on this node (node %d)", queue, token)
                    await self.broker.take(queue)
                elif owner != token and queue in self.held:
                    self.held.discard(queue)
                    log.warning(
                        "queue %s: not consumed on this node any more (node %s consumes it)",
                        queue, owner,
                    )  # fmt: skip
                    await self.broker.drop(queue)

    def _pool(self) -> Any:
        if self.store.pool is None:
            raise StoreUnavailable("the shared store is not open")
        return self.store.pool


def place_on_nodes(broker: QueueBroker, store: PostgresStore) -> None:
    """Keep `broker`'s messages in `store` and consume each queue on one node (before the
    broker opens)."""
    placement = NodePlacement(store, broker)
    broker.store = PgQueueStore(store)
    broker.placement = placement
    store.nodes.tickers.append(placement.tick)
    store.nodes.on_queue = placement.notified
