"""Queue producers and consumers, resolved from ``[[queues.producers]]`` and
``[[queues.consumers]]``.

Rules:

* A producer gives ``env.<binding>`` a queue by name; its ``delivery_delay`` (seconds) is the
  default delay of what it sends.
* A consumer makes the Worker's ``queue()`` handler receive the named queue's messages. A
  queue has at most one consumer (Cloudflare's rule), and a queue cannot be its own dead
  letter queue. Unset settings take Cloudflare's documented defaults: batches of up to 10
  messages, a 5 s batch timeout, 3 retries, no retry delay. ``max_concurrency`` unset means
  celld's own cap (``DEFAULT_CONCURRENCY``): Cloudflare scales consumers up by itself.
* Pull consumers (``type = "http_pull"``) are refused: their HTTP API lives on Cloudflare's
  network. ``visibility_timeout_ms`` only applies to them.
* A body sent without ``contentType`` is JSON from compatibility date 2024-03-18 (or with
  the ``queues_json_messages`` flag; ``no_queues_json_messages`` turns it off), else a
  structured clone (``v8``), as workerd decides it (celld.project.compat).
* Queues are keyed by name, so two producers of one queue (or a producer and a consumer in
  different Workers of one session) share its messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .compat import behaviours
from .errors import Issue
from .schema import TopLevelModel

DEFAULT_BATCH_SIZE = 10
DEFAULT_BATCH_TIMEOUT_S = 5.0
DEFAULT_RETRIES = 3
#: Batches of one queue delivered at once when `max_concurrency` is unset.
DEFAULT_CONCURRENCY = 20


@dataclass(frozen=True)
class QueueProducer:
    binding: str
    queue: str
    #: seconds; the default `delaySeconds` of what this binding sends
    delivery_delay: int = 0


@dataclass(frozen=True)
class QueueConsumer:
    queue: str
    max_batch_size: int = DEFAULT_BATCH_SIZE
    max_batch_timeout_ms: int = int(DEFAULT_BATCH_TIMEOUT_S * 1000)
    max_retries: int = DEFAULT_RETRIES
    #: seconds before a retried message is delivered again (unless the retry names a delay)
    retry_delay: int = 0
    dead_letter_queue: str | None = None
    max_concurrency: int = DEFAULT_CONCURRENCY


@dataclass(frozen=True)
class QueuesConfig:
    producers: tuple[QueueProducer, ...] = ()
    consumers: tuple[QueueConsumer, ...] = ()
    #: the `contentType` of a body sent without one: "json" or "v8"
    default_content_type: str = "json"

    @property
    def empty(self) -> bool:
        return not (self.producers or self.consumers)


def default_content_type(compatibility_date: str | None, flags: list[str]) -> str:
    return "json" if behaviours(compatibility_date, flags)["queuesJsonMessages"] else "v8"


def resolve_queues(
    top: TopLevelModel, claim: Callable[[str, str], None]
) -> tuple[QueuesConfig, list[Issue]]:
    """The queues of a config, and every problem with them."""
    model = top.queues
    if model is None:
        return QueuesConfig(), []
    issues: list[Issue] = []
    producers = []
    for index, p in enumerate(model.producers):
        claim(p.binding, f"queues.producers[{index}].binding")
        producers.append(QueueProducer(p.binding, p.queue, p.delivery_delay or 0))
    consumers = []
    consumed: dict[str, int] = {}
    for index, c in enumerate(model.consumers):
        where = f"queues.consumers[{index}]"
        if c.type not in (None, "worker"):
            issues.append(
                Issue(
                    f"{where}.type",
                    f"{c.type!r} consumers read through Cloudflare's HTTP API, which celld "
                    'does not serve; use a Worker consumer (type = "worker" or no type)',
                )
            )
            continue
        if c.queue in consumed:
            issues.append(
                Issue(
                    f"{where}.queue",
                    f"queue {c.queue!r} already has a consumer (queues.consumers"
                    f"[{consumed[c.queue]}]); a queue has one consumer",
                )
            )
            continue
        if c.dead_letter_queue == c.queue:
            issues.append(
                Issue(f"{where}.dead_letter_queue", "a queue cannot be its own dead letter queue")
            )
            continue
        consumed[c.queue] = index
        consumers.append(
            QueueConsumer(
                queue=c.queue,
                max_batch_size=c.max_batch_size or DEFAULT_BATCH_SIZE,
                max_batch_timeout_ms=round(
                    1000
                    * (
                        DEFAULT_BATCH_TIMEOUT_S
                        if c.max_batch_timeout is None
                        else c.max_batch_timeout
                    )
                ),
                max_retries=DEFAULT_RETRIES if c.max_retries is None else c.max_retries,
                retry_delay=c.retry_delay or 0,
                dead_letter_queue=c.dead_letter_queue,
                max_concurrency=c.max_concurrency or DEFAULT_CONCURRENCY,
            )
        )
    default = default_content_type(top.compatibility_date, top.compatibility_flags)
    return QueuesConfig(tuple(producers), tuple(consumers), default), issues
