"""The pure rules of celld/queues/rules.py: when a batch is due, what an outcome does."""

from __future__ import annotations

from celld.project.queues import QueueConsumer
from celld.queues.rules import Delivered, Outcome, batch_due, batch_due_at, settle

NOW = 1_000_000
CONSUMER = QueueConsumer("jobs", max_batch_size=3, max_batch_timeout_ms=5000, max_retries=2)
BATCH = [Delivered(1, "a", 0), Delivered(2, "b", 0), Delivered(3, "c", 0)]


def test_a_batch_is_due_when_full_or_when_its_oldest_message_waited_the_timeout() -> None:
    assert not batch_due(0, None, NOW, CONSUMER)
    assert batch_due(3, NOW, NOW, CONSUMER)  # full
    assert not batch_due(2, NOW, NOW + 4999, CONSUMER)
    assert batch_due(2, NOW, NOW + 5000, CONSUMER)
    assert batch_due_at(NOW, CONSUMER) == NOW + 5000
    assert batch_due_at(None, CONSUMER) is None
    at_once = QueueConsumer("jobs", max_batch_timeout_ms=0)
    assert batch_due(1, NOW, NOW, at_once)


def test_a_returning_handler_acknowledges_everything() -> None:
    out = settle(BATCH, Outcome(ok=True), CONSUMER, NOW)
    assert out.acked == [1, 2, 3] and not (out.retried or out.dead_lettered or out.dropped)


def test_a_throwing_handler_retries_all_but_what_it_acknowledged() -> None:
    out = settle(BATCH, Outcome(ok=False, acks=frozenset({"b"})), CONSUMER, NOW)
    assert out.acked == [2]
    assert out.retried == [(1, NOW, 1), (3, NOW, 1)]


def test_explicit_retries_come_before_ack_all_and_keep_their_delay() -> None:
    outcome = Outcome(ok=True, ack_all=True, retries={"a": 30, "c": None})
    out = settle(BATCH, outcome, QueueConsumer("q", retry_delay=7, max_retries=3), NOW)
    assert out.acked == [2]
    assert out.retried == [(1, NOW + 30_000, 1), (3, NOW + 7_000, 1)]


def test_retry_all_delay_beats_the_consumers_retry_delay() -> None:
    consumer = QueueConsumer("q", retry_delay=7)
    out = settle(BATCH[:1], Outcome(ok=True, retry_all=True, retry_all_delay=2), consumer, NOW)
    assert out.retried == [(1, NOW + 2000, 1)]
    out = settle(BATCH[:1], Outcome(ok=True, retry_all=True), consumer, NOW)
    assert out.retried == [(1, NOW + 7000, 1)]


def test_after_max_retries_a_message_is_dead_lettered_or_dropped() -> None:
    tired = [Delivered(1, "a", 1), Delivered(2, "b", 2)]  # a: 2nd delivery, b: 3rd (last)
    out = settle(tired, Outcome.failed(), CONSUMER, NOW)
    assert out.retried == [(1, NOW, 2)] and out.dropped == [2] and not out.dead_lettered
    with_dlq = QueueConsumer("jobs", max_retries=2, dead_letter_queue="dead")
    out = settle(tired, Outcome.failed(), with_dlq, NOW)
    assert out.dead_lettered == [2] and not out.dropped


def test_no_retries_means_one_delivery() -> None:
    once = QueueConsumer("q", max_retries=0)
    out = settle(BATCH[:1], Outcome(ok=False), once, NOW)
    assert out.dropped == [1]
