"""When a batch is due and what a batch's outcome does to each message: pure rules, no I/O.

Batching: a consumer gets a batch as soon as `max_batch_size` messages are ready, or once
the oldest ready message has waited `max_batch_timeout` (0: at once).

Outcome, decided per message in this order (as Cloudflare documents it):

1. `message.ack()`: acknowledged, never delivered again, even if the handler then throws.
2. `message.retry({delaySeconds})`: retried.
3. `batch.ackAll()`: acknowledged.
4. `batch.retryAll({delaySeconds})`, or the handler threw (or its isolate failed): retried.
5. Otherwise the handler returned: acknowledged.

(The JS side keeps the first of conflicting calls, as workerd does: `ack()` after `retry()` of
the same message, or `retryAll()` after `ackAll()`, has no effect and logs a warning.)

A retry waits the delay the retry named, else the one `retryAll()` named, else the consumer's
`retry_delay`. A message that has failed `max_retries + 1` deliveries is moved to the
`dead_letter_queue` (same id and timestamp, attempts start again), or dropped when there is
none, as Cloudflare does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from celld.project.queues import QueueConsumer


def batch_due(
    ready: int, oldest_ready_ms: int | None, now_ms: int, consumer: QueueConsumer
) -> bool:
    if ready <= 0:
        return False
    if ready >= consumer.max_batch_size:
        return True
    assert oldest_ready_ms is not None
    return now_ms >= oldest_ready_ms + consumer.max_batch_timeout_ms


def batch_due_at(oldest_ready_ms: int | None, consumer: QueueConsumer) -> int | None:
    """When a partial batch becomes due (None: nothing is ready)."""
    if oldest_ready_ms is None:
        return None
    return oldest_ready_ms + consumer.max_batch_timeout_ms


@dataclass(frozen=True)
class Delivered:
    """A message as it was delivered: `failed` deliveries before this one."""

    seq: int
    id: str
    failed: int


@dataclass(frozen=True)
class Outcome:
    """What the handler said about a batch (see the module's docstring)."""

    ok: bool
    ack_all: bool = False
    retry_all: bool = False
    #: seconds, from retryAll({delaySeconds})
    retry_all_delay: int | None = None
    acks: frozenset[str] = frozenset()
    #: message id -> seconds from retry({delaySeconds}), or None
    retries: Mapping[str, int | None] = field(default_factory=dict)

    @classmethod
    def failed(cls) -> Outcome:
        """The handler never answered (its isolate failed): the whole batch is retried."""
        return cls(ok=False)


@dataclass
class Settlement:
    acked: list[int] = field(default_factory=list)
    #: (seq, visible at (epoch ms), failed deliveries so far)
    retried: list[tuple[int, int, int]] = field(default_factory=list)
    dead_lettered: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)


def settle(
    batch: list[Delivered], outcome: Outcome, consumer: QueueConsumer, now_ms: int
) -> Settlement:
    out = Settlement()
    batch_delay = outcome.retry_all_delay
    for message in batch:
        if message.id in outcome.acks:
            out.acked.append(message.seq)
            continue
        if message.id in outcome.retries:
            delay = outcome.retries[message.id]
        elif outcome.ack_all or (outcome.ok and not outcome.retry_all):
            out.acked.append(message.seq)
            continue
        else:
            delay = None
        if delay is None:
            delay = batch_delay if batch_delay is not None else consumer.retry_delay
        failed = message.failed + 1
        if failed <= consumer.max_retries:
            out.retried.append((message.seq, now_ms + delay * 1000, failed))
        elif consumer.dead_letter_queue is not None:
            out.dead_lettered.append(message.seq)
        else:
            out.dropped.append(message.seq)
    return out
