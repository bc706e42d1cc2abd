"""Delivers one consumed queue's batches to its Worker's `queue()` handler.

The loop sleeps on the service clock (the manual clock in tests) until a batch is due or a
delayed message becomes visible, delivers up to `max_concurrency` batches at once, and
stores each batch's outcome (rules.py) in one transaction before it forgets the batch. A
delivery that fails as a whole (the isolate faulted, the handler threw) retries the batch
minus what it acknowledged; an outcome that cannot be stored leaves the messages as they are
on disk, ready again. A message whose row is gone when its batch is read (settled by a
previous owner of the queue, see placement.py) is forgotten, not delivered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from celld.bindings.wire import to_wire
from celld.cells.clock import Cancellable
from celld.project.queues import QueueConsumer
from celld.queues.placement import QueueFenced
from celld.queues.rules import Delivered, Outcome, batch_due, batch_due_at, settle
from celld.queues.store import StoredMessage

if TYPE_CHECKING:
    from celld.queues.broker import QueueBroker

log = logging.getLogger("celld.queues")

#: (queue name, messages as JS reads them, batch metadata) -> what the handler said
Deliver = Callable[[str, list[dict[str, Any]], dict[str, Any]], Awaitable[Outcome]]


class Dispatcher:
    def __init__(self, broker: QueueBroker, consumer: QueueConsumer, deliver: Deliver) -> None:
        self.broker = broker
        self.consumer = consumer
        self.deliver = deliver
        self.backlog = broker.backlog(consumer.queue)
        self._wake = asyncio.Event()
        self._flying: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        #: batches whose outcome is stored (tests and metrics wait on it)
        self.settled = 0

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._task.add_done_callback(self._ended)

    def poke(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Stop delivering; batches in flight are abandoned (their messages stay stored and
        are delivered again after the next start)."""
        tasks = [t for t in (self._task, *self._flying) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        self._flying.clear()

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "queue %s: the consumer loop stopped", self.consumer.queue,
                exc_info=task.exception(),
            )  # fmt: skip

    async def _run(self) -> None:
        consumer, backlog, clock = self.consumer, self.backlog, self.broker.clock
        while True:
            now = clock.now()
            backlog.promote(now)
            while len(self._flying) < consumer.max_concurrency and batch_due(
                backlog.ready_count, backlog.oldest_ready, now, consumer
            ):
                batch = backlog.take(consumer.max_batch_size)
                task = asyncio.get_running_loop().create_task(self._deliver(batch))
                self._flying.add(task)
                task.add_done_callback(self._landed)
            wake_at = [backlog.next_visible]
            if len(self._flying) < consumer.max_concurrency:
                wake_at.append(batch_due_at(backlog.oldest_ready, consumer))
            due = [t for t in wake_at if t is not None]
            timer: Cancellable | None = clock.call_at(min(due), self._wake.set) if due else None
            try:
                await self._wake.wait()
            finally:
                self._wake.clear()
                if timer is not None:
                    timer.cancel()

    def _landed(self, task: asyncio.Task[None]) -> None:
        self._flying.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("queue %s: a delivery failed", self.consumer.queue, exc_info=task.exception())
        self._wake.set()

    async def _deliver(self, batch: list[StoredMessage]) -> None:
        queue, store, clock = self.consumer.queue, self.broker.store, self.broker.clock
        seqs = [m.seq for m in batch]
        if not await self.broker.may_deliver(queue):
            log.warning("queue %s: not consumed on this node any more (no longer held)", queue)
            for seq in seqs:
                self.backlog.back(seq)
            self.broker.fenced(queue)
            return
        try:
            bodies = await store.bodies(seqs)
        except Exception:
            log.exception("queue %s: could not read a batch; it will be delivered again", queue)
            for seq in seqs:
                self.backlog.back(seq)
            return
        for gone in [m for m in batch if m.seq not in bodies]:
            self.backlog.done(gone.seq)
        batch = [m for m in batch if m.seq in bodies]
        if not batch:
            return
        seqs = [m.seq for m in batch]
        messages = [
            {
                "id": m.id,
                "timestamp": m.timestamp_ms,
                "attempts": m.failed + 1,
                "contentType": m.content_type,
                "body": to_wire(bodies.get(m.seq, b"")),
            }
            for m in batch
        ]
        metadata = {"metrics": self.backlog.metrics()}
        try:
            outcome = await self.deliver(queue, messages, metadata)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.error("queue %s: the batch's delivery failed: %s", queue, error)
            outcome = Outcome.failed()
        now = clock.now()
        delivered = [Delivered(m.seq, m.id, m.failed) for m in batch]
        result = settle(delivered, outcome, self.consumer, now)
        dlq = self.consumer.dead_letter_queue
        moved = [(seq, dlq, now) for seq in result.dead_lettered] if dlq else []
        try:
            new_seqs = await store.settle(
                queue, [*result.acked, *result.dropped], result.retried, moved
            )
        except QueueFenced as error:
            log.warning("queue %s: not consumed on this node any more: %s", queue, error)
            self.broker.fenced(queue)
            return
        except Exception:
            log.exception(
                "queue %s: could not store a batch's outcome; it will be delivered again", queue
            )
            for seq in seqs:
                self.backlog.back(seq)
            return
        attempts = self.consumer.max_retries + 1
        for seq in [*result.acked, *result.dropped]:
            message = self.backlog.done(seq)
            if seq in result.dropped and message is not None:
                self.broker.dropped[queue] += 1
                log.warning(
                    'queue %s: dropped message "%s" after %d failed attempt%s',
                    queue, message.id, attempts, "" if attempts == 1 else "s",
                )  # fmt: skip
        for seq, visible_at, failed in result.retried:
            self.backlog.again(seq, visible_at, failed)
        moved_to: list[StoredMessage] = []
        for seq, new_seq in zip(result.dead_lettered, new_seqs, strict=True):
            message = self.backlog.done(seq)
            if message is None or dlq is None:
                continue
            self.broker.dead_lettered[queue] += 1
            log.warning(
                'queue %s: moved message "%s" to dead letter queue "%s" after %d failed attempt%s',
                queue, message.id, dlq, attempts, "" if attempts == 1 else "s",
            )  # fmt: skip
            moved_to.append(replace(message, seq=new_seq, queue=dlq, visible_at=now, failed=0))
        if dlq is not None and moved_to:
            self.broker.landed(dlq, [m.seq for m in moved_to], moved_to)
        self.settled += 1
        log.debug("queue %s: %d/%d acknowledged", queue, len(result.acked), len(batch))
