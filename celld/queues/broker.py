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
from celld.queues.rules import Outcome
from celld.queues.store import NewMessage, QueueStore, StoredMessage

log = logging.getLogger("celld.queues")


def store_path(state: Path) -> Path:
    return state / "queues.sqlite3"


class QueueBroker:
    def __init__(self, state: Path, clock: Clock, *, synchronous: str = "FULL") -> None:
        self.store = QueueStore(store_path(state), synchronous=synchronous)
        self.clock = clock
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
            for message in await self.store.index():
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
        if self._started:
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
        """Start delivering to every consumer attached (and to those attached later)."""
        for dispatcher in self.consumers.values():
            if not dispatcher.started:
                dispatcher.start()
        self._started = True

    async def stop(self) -> None:
        await self.release(list(self.consumers))
        self._started = False
        if self.opened:
            await self.store.close()
            self.opened = False

    def queues(self) -> list[dict[str, Any]]:
        """Every queue with messages, a consumer or a history, as the operator sees it:
        ready and delayed messages (their sum is the depth), those in flight, and how many
        were dead-lettered or dropped since celld started."""
        names = {q for q, b in self._backlogs.items() if b.messages} | set(self.consumers)
        names |= set(self.dead_lettered) | set(self.dropped)
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

    def arrived(self, message: StoredMessage) -> None:
        """A stored message joins its queue (and wakes that queue's consumer)."""
        self._backlogs[message.queue].add(message)
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
        for seq, row in zip(seqs, rows, strict=True):
            self.arrived(
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
            )

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
            return self._backlogs[queue].metrics()
        else:
            raise HostError(f"celld: a queue has no method {method!r}")
        return {"metadata": {"metrics": self._backlogs[queue].metrics()}}


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
