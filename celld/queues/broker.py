"""The queues of one session, keyed by name: producers send to them, consumers drain them.

A session has one broker whichever Workers it runs: a producer binding in one Worker and the
consumer in another meet here by queue name (each Worker attaches its consumers with its
own `deliver`). A queue nobody consumes keeps its messages (durably) until a consumer
appears, as on Cloudflare, and its backlog shows in `metrics()`.

The host operation ``queue`` (js/bindings/queue.js) serves `send`, `sendBatch` and
`metrics`; a send resolves once its messages are committed to the store.
"""

from __future__ import annotations

import logging
import secrets
from collections import defaultdict
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

    def backlog(self, queue: str) -> Backlog:
        return self._backlogs[queue]

    async def open(self) -> None:
        """Open the store and index what it holds (messages of every queue)."""
        await self.store.open()
        for message in await self.store.index():
            self._backlogs[message.queue].add(message)

    def consume(self, consumer: QueueConsumer, deliver: Deliver) -> Dispatcher:
        """Deliver `consumer.queue`'s batches through `deliver` (once the broker starts)."""
        if consumer.queue in self.consumers:
            raise ValueError(f"queue {consumer.queue!r} already has a consumer")
        dispatcher = Dispatcher(self, consumer, deliver)
        self.consumers[consumer.queue] = dispatcher
        return dispatcher

    def start(self) -> None:
        for dispatcher in self.consumers.values():
            dispatcher.start()

    async def stop(self) -> None:
        for dispatcher in self.consumers.values():
            await dispatcher.stop()
        await self.store.close()

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
