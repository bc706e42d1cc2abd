"""The queues of one session, keyed by name: producers send to them, consumers drain them.

A session has one broker whichever Workers it runs (celld/server/session.py makes it and
hands it to each Worker): a producer binding in one Worker and the consumer in another meet
here by queue name (each Worker attaches its consumers with its own `deliver`, and takes
them back when it stops). A queue nobody consumes keeps its messages (durably) until a
consumer appears, as on Cloudflare, and its backlog shows in `metrics()`.

The store opens on first use (`open()` may be called by every Worker that uses queues), so
a session whose Workers use none makes no file.

The host operation ``queue`` (js/bindings/queue.js) serves `send`, `sendBatch` and
`metrics`; a send resolves once its messages are committed to the store.

With several processes or nodes sharing the store, `placement` (celld/queues/placement.py)
says which queues this broker owns: it indexes, delivers and settles only those; a send to
another queue is committed here and its owner told (`adopt` is the owner's side), and its
`metrics()` are read from the store.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from celld.bindings.errors import type_error
from celld.cells.clock import Clock
from celld.isolate.host import HostError
from celld.project.queues import QueueConsumer
from celld.queues.backlog import Backlog
from celld.queues.dispatcher import Deliver, Dispatcher
from celld.queues.limits import Outgoing, check_batch, check_send
from celld.queues.placement import FULL_EVERY, RESYNC_S, Alone, QueuePlacement
from celld.queues.rules import Outcome
from celld.queues.store import NewMessage, QueueStore, StoredMessage

log = logging.getLogger("celld.queues")


def store_path(state: Path) -> Path:
    return state / "queues.sqlite3"


class QueueBroker:
    def __init__(
        self,
        state: Path,
        clock: Clock,
        *,
        synchronous: str = "FULL",
        store: Any = None,
        placement: QueuePlacement | None = None,
    ) -> None:
        #: a QueueStore, or one with its methods on another database (pgqueues.py)
        self.store = store or QueueStore(store_path(state), synchronous=synchronous)
        self.clock = clock
        self.placement: QueuePlacement = placement or Alone()
        #: queue -> reads of its rows in progress (adopt, resync); while any is, the seqs
        #: its backlog forgets are kept, so a read that began before a row was settled
        #: does not bring it back
        self._reading: Counter[str] = Counter()
        self._resync: asyncio.Task[None] | None = None
        #: queue -> the highest seq a read of the whole queue (or of what follows) saw
        self._read_up_to: dict[str, int] = {}
        self._dropping: set[asyncio.Task[None]] = set()
        self._backlogs: defaultdict[str, Backlog] = defaultdict(Backlog.empty)
        self.consumers: dict[str, Dispatcher] = {}
        #: queue -> the Worker consuming it (for errors and the operator surface)
        self.consumed_by: dict[str, str] = {}
        #: messages moved to a dead letter queue / dropped, by the queue they failed in
        self.dead_lettered: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.opened = False
        self._opening = asyncio.Lock()
        self._started = False

    def backlog(self, queue: str) -> Backlog:
        return self._backlogs[queue]

    async def open(self) -> None:
        """Open the store and index what it holds (messages of every queue); once."""
        async with self._opening:
            if self.opened:
                return
            await self.store.open()
            owns = self.placement.owns
            # (a placement that claims its queues owns none yet: `take` reads each one)
            if not getattr(self.placement, "claimed", False):
                for message in await self.store.index():
                    if owns(message.queue):
                        self._backlogs[message.queue].add(message)
            self.opened = True

    def consume(self, consumer: QueueConsumer, deliver: Deliver, worker: str = "") -> Dispatcher:
        """Deliver `consumer.queue`'s batches through `deliver` (at once if the broker has
        started, else once it starts). A queue has one consumer, as on Cloudflare."""
        if consumer.queue in self.consumers:
            by = self.consumed_by.get(consumer.queue) or "another Worker"
            raise ValueError(
                f"queue {consumer.queue!r} already has a consumer (Worker {by}); "
                "a queue has one consumer Worker"
            )
        dispatcher = Dispatcher(self, consumer, deliver)
        self.consumers[consumer.queue] = dispatcher
        self.consumed_by[consumer.queue] = worker
        if self._started and self.placement.owns(consumer.queue):
            dispatcher.start()
        return dispatcher

    async def release(self, queues: list[str]) -> None:
        """Stop delivering `queues` (their Worker stops); their messages stay stored."""
        for queue in queues:
            dispatcher = self.consumers.pop(queue, None)
            self.consumed_by.pop(queue, None)
            if dispatcher is not None:
                await dispatcher.stop()

    def start(self) -> None:
        """Start delivering to every consumer attached (and to those attached later) of
        the queues this broker owns."""
        for queue, dispatcher in self.consumers.items():
            if not dispatcher.started and self.placement.owns(queue):
                dispatcher.start()
        self._started = True
        if self.placement.shared and self._resync is None:
            self._resync = asyncio.get_running_loop().create_task(self._resync_loop())

    async def claim(self) -> None:
        """Claim the consumed queues now if the placement claims them (several nodes), so
        a node starts consuming without waiting for its first maintenance tick."""
        tick = getattr(self.placement, "tick", None)
        if tick is not None:
            await tick()

    async def stop(self) -> None:
        if self._resync is not None:
            self._resync.cancel()
            await asyncio.gather(self._resync, return_exceptions=True)
            self._resync = None
        await self.release(list(self.consumers))
        self._started = False
        if self.opened:
            await self.store.close()
            self.opened = False

    def queues(self) -> list[dict[str, Any]]:
        """Every queue with messages, a consumer or a history, as the operator sees it (of
        those this broker owns, when several share the messages):
        ready and delayed messages (their sum is the depth), those in flight, and how many
        were dead-lettered or dropped since celld started."""
        names = {q for q, b in self._backlogs.items() if b.messages} | set(self.consumers)
        names |= set(self.dead_lettered) | set(self.dropped)
        if self.placement.shared:  # the others' queues are listed by their owners
            names = {name for name in names if self.placement.owns(name)}
        out, now = [], self.clock.now()
        for name in sorted(names):
            backlog = self._backlogs[name]
            # the heap also holds messages whose time came while no consumer promoted them
            delayed = sum(1 for at, _ in backlog.delayed if at > now)
            ready = backlog.ready_count + len(backlog.delayed) - delayed
            out.append(
                {
                    "queue": name,
                    "consumer": self.consumed_by.get(name),
                    "depth": ready + delayed,
                    "ready": ready,
                    "delayed": delayed,
                    "inFlight": len(backlog.in_flight),
                    "deadLettered": self.dead_lettered[name],
                    "dropped": self.dropped[name],
                    "backlogBytes": backlog.size,
                }
            )
        return out

    # -- several processes or nodes --------------------------------------------------------

    async def take(self, queue: str) -> None:
        """This broker now owns `queue` (its placement says so): read its messages from the
        store and start its consumer."""
        self._backlogs[queue].clear()
        self._read_up_to[queue] = await self._read(queue, None)
        dispatcher = self.consumers.get(queue)
        if self._started and dispatcher is not None and not dispatcher.started:
            dispatcher.start()

    async def drop(self, queue: str) -> None:
        """`queue` is no longer this broker's: stop its consumer (batches in flight are
        abandoned; their messages stay stored) and forget its backlog."""
        dispatcher = self.consumers.get(queue)
        if dispatcher is not None:
            await dispatcher.stop()
        self._backlogs[queue].clear()

    async def may_deliver(self, queue: str) -> bool:
        """Whether a batch of `queue` may be handed to its consumer now (a placement that
        claims queues checks its claim and lease; otherwise always)."""
        check = getattr(self.placement, "may_deliver", None)
        return True if check is None else bool(await check(queue))

    def fenced(self, queue: str) -> None:
        """A settle of `queue` was refused (another node took it): stop consuming it."""
        lost = getattr(self.placement, "lost", None)
        if lost is not None:
            lost(queue)
        task = asyncio.get_running_loop().create_task(self.drop(queue))
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)

    async def adopt(self, queue: str, seqs: list[int]) -> None:
        """Another process or node committed rows `seqs` of `queue`, which this broker
        owns: index those not known yet (nothing if it does not own `queue`)."""
        if self.placement.owns(queue):
            await self._read(queue, seqs)

    async def _read(self, queue: str, seqs: list[int] | None, after: int = 0) -> int:
        """Index the stored messages of `queue` (those among `seqs`, or all with a seq
        above `after`) not known; the highest seq read (`after` if none)."""
        backlog = self._backlogs[queue]
        fresh: list[StoredMessage] = []
        self._reading[queue] += 1
        if backlog.removed is None:
            backlog.removed = set()
        try:
            rows = await (
                self.store.index(queue, after) if seqs is None else self.store.rows(queue, seqs)
            )
            if not self.placement.owns(queue):
                return after
            fresh = [
                m for m in rows if m.seq not in backlog.messages and m.seq not in backlog.removed
            ]
            for message in fresh:
                backlog.add(message)
        finally:
            self._reading[queue] -= 1
            if self._reading[queue] <= 0:
                del self._reading[queue]
                backlog.removed = None
        dispatcher = self.consumers.get(queue)
        if fresh and dispatcher is not None:
            dispatcher.poke()
        return max((m.seq for m in rows), default=after)

    async def _resync_loop(self) -> None:
        """Read the owned queues again now and then: rows whose sender died before it told
        this owner, or whose notification was lost, are delivered all the same. A pass
        reads only rows above the highest seq an earlier pass read (exact on SQLite, whose
        writers commit one after another, in seq order), and every `FULL_EVERY`th pass
        reads the whole queue (PostgreSQL allocates seqs before commit, so a row may
        commit below one already read)."""
        passes = 0
        while True:
            await asyncio.sleep(RESYNC_S)
            passes += 1
            for queue in [q for q in self.consumers if self.placement.owns(q)]:
                after = 0 if passes % FULL_EVERY == 0 else self._read_up_to.get(queue, 0)
                try:
                    read = await self._read(queue, None, after)
                    self._read_up_to[queue] = max(read, self._read_up_to.get(queue, 0))
                except Exception as error:  # the store is away: the next pass tries again
                    log.warning("queue %s: could not read its messages again: %s", queue, error)

    def landed(self, queue: str, seqs: list[int], messages: list[StoredMessage]) -> None:
        """Rows of `queue` were committed here: index them if this broker owns `queue`, else
        tell its owner."""
        if self.placement.owns(queue):
            for message in messages:
                self.arrived(message)
        elif seqs:
            self.placement.arrived(queue, seqs)

    def arrived(self, message: StoredMessage) -> None:
        """A stored message joins its queue (and wakes that queue's consumer); one already
        known (read from the store before its sender got here) is not added twice."""
        backlog = self._backlogs[message.queue]
        if message.seq in backlog.messages:
            return
        backlog.add(message)
        dispatcher = self.consumers.get(message.queue)
        if dispatcher is not None:
            dispatcher.poke()

    async def send(self, queue: str, messages: list[Outgoing]) -> None:
        """Store `messages` (all or none), then hand them to the queue."""
        now = self.clock.now()
        rows = [
            NewMessage(
                queue, secrets.token_hex(16), now, m.content_type, m.body, now + m.delay_s * 1000
            )
            for m in messages
        ]
        seqs = await self.store.add(rows)
        stored = [
            StoredMessage(
                seq,
                queue,
                row.id,
                row.timestamp_ms,
                row.content_type,
                row.visible_at,
                0,
                len(row.body),
            )  # fmt: skip
            for seq, row in zip(seqs, rows, strict=True)
        ]
        self.landed(queue, seqs, stored)

    async def metrics(self, queue: str) -> dict[str, int]:
        """Cloudflare's `metrics()`: from the backlog of an owned queue, else the store."""
        if self.placement.owns(queue):
            return self._backlogs[queue].metrics()
        return dict(await self.store.stats(queue))

    async def op_queue(self, message: dict[str, Any]) -> Any:
        """The `queue` host operation: `send`, `sendBatch` and `metrics` of a producer."""
        queue = message.get("queue")
        if not isinstance(queue, str) or not queue:
            raise type_error("celld: a queue operation names no queue")
        method = message.get("method")
        if method == "send":
            await self.send(queue, [check_send(message)])
        elif method == "sendBatch":
            await self.send(queue, check_batch(message))
        elif method == "metrics":
            return await self.metrics(queue)
        else:
            raise HostError(f"celld: a queue has no method {method!r}")
        return {"metadata": {"metrics": await self.metrics(queue)}}


def outcome_from_js(answer: dict[str, Any]) -> Outcome:
    """What js/bindings/queue.js reports about a batch, as rules.py reads it."""
    retries = {str(i): (None if d is None else int(d)) for i, d in answer.get("retries") or []}
    delay = answer.get("retryAllDelay")
    return Outcome(
        ok=answer.get("outcome") == "ok",
        ack_all=bool(answer.get("ackAll")),
        retry_all=bool(answer.get("retryAll")),
        retry_all_delay=None if delay is None else int(delay),
        acks=frozenset(str(i) for i in answer.get("acks") or []),
        retries=retries,
    )
