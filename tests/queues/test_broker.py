"""The broker and its dispatcher on a real SQLite store and the manual clock, with a Python
function in the Worker's place: batching, concurrency, retries, dead letters, restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from celld.cells.clock import ManualClock
from celld.isolate.host import HostError
from celld.project.queues import QueueConsumer
from celld.queues.broker import QueueBroker
from celld.queues.limits import Outgoing
from celld.queues.rules import Outcome

T0 = 1_700_000_000_000


class Consumer:
    """Records batches; answers with `decide(messages)` (default: all fine)."""

    def __init__(self, decide: Any = None, hold: asyncio.Event | None = None) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.decide = decide or (lambda messages: Outcome(ok=True))
        self.hold = hold
        self.arrived = asyncio.Event()
        self.running = 0
        self.most_at_once = 0

    async def __call__(
        self, queue: str, messages: list[dict[str, Any]], metadata: dict[str, Any]
    ) -> Outcome:
        self.batches.append(messages)
        self.arrived.set()
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.hold is not None:
                await self.hold.wait()
            return self.decide(messages)
        finally:
            self.running -= 1

    async def wait_batches(self, count: int) -> None:
        while len(self.batches) < count:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 10)


def text(body: str, delay: int = 0) -> Outgoing:
    return Outgoing(body.encode(), "text", delay)


async def settled(broker: QueueBroker, queue: str, count: int) -> None:
    dispatcher = broker.consumers[queue]
    for _ in range(1000):
        if dispatcher.settled >= count:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{queue}: {dispatcher.settled} batches settled, wanted {count}")


@pytest.fixture
async def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    clock = ManualClock(T0)
    broker = QueueBroker(tmp_path, clock)
    await broker.open()
    yield broker
    await broker.stop()


async def test_partial_batches_wait_for_the_timeout_full_ones_go_at_once(
    broker: QueueBroker,
) -> None:
    consumer = Consumer()
    broker.consume(QueueConsumer("q", max_batch_size=3, max_batch_timeout_ms=5000), consumer)
    broker.start()
    await broker.send("q", [text("a"), text("b")])
    broker.clock.advance(4999)  # type: ignore[attr-defined]
    await broker.send("q", [text("c")])  # the third fills the batch before its timeout
    await consumer.wait_batches(1)
    assert [m["body"]["text"] for m in consumer.batches[0]] == ["a", "b", "c"]
    await broker.send("q", [text("d"), text("e")])
    broker.clock.advance(5000)  # type: ignore[attr-defined]
    await consumer.wait_batches(2)
    assert [m["body"]["text"] for m in consumer.batches[1]] == ["d", "e"]
    await broker.send("q", [text(str(i)) for i in range(7)])
    await consumer.wait_batches(4)  # two full batches at once; 1 left waiting
    assert [len(b) for b in consumer.batches] == [3, 2, 3, 3]
    assert broker.backlog("q").ready_count == 1


async def test_max_concurrency_bounds_batches_in_flight(broker: QueueBroker) -> None:
    hold = asyncio.Event()
    consumer = Consumer(hold=hold)
    broker.consume(
        QueueConsumer("q", max_batch_size=1, max_batch_timeout_ms=0, max_concurrency=2), consumer
    )
    broker.start()
    await broker.send("q", [text(str(i)) for i in range(5)])
    await consumer.wait_batches(2)
    hold.set()
    await consumer.wait_batches(5)
    await settled(broker, "q", 5)
    assert consumer.most_at_once == 2


async def test_retries_then_the_dead_letter_queue_keeps_id_and_timestamp(
    broker: QueueBroker,
) -> None:
    failing = Consumer(lambda messages: Outcome(ok=False))
    dead = Consumer()
    broker.consume(
        QueueConsumer("q", max_batch_timeout_ms=0, max_retries=2, retry_delay=10,
                      dead_letter_queue="dlq"),
        failing,
    )  # fmt: skip
    broker.consume(QueueConsumer("dlq", max_batch_timeout_ms=0), dead)
    broker.start()
    await broker.send("q", [text("x")])
    await failing.wait_batches(1)
    await settled(broker, "q", 1)
    broker.clock.advance(10_000)  # type: ignore[attr-defined]
    await failing.wait_batches(2)
    await settled(broker, "q", 2)
    broker.clock.advance(10_000)  # type: ignore[attr-defined]
    await dead.wait_batches(1)
    attempts = [b[0]["attempts"] for b in failing.batches]
    assert attempts == [1, 2, 3]
    [moved] = dead.batches[0]
    first = failing.batches[0][0]
    assert (moved["id"], moved["timestamp"], moved["attempts"]) == (first["id"], T0, 1)
    await settled(broker, "dlq", 1)
    assert broker.backlog("q").metrics()["backlogCount"] == 0
    assert broker.backlog("dlq").metrics()["backlogCount"] == 0


async def test_a_failing_delivery_retries_the_batch(broker: QueueBroker) -> None:
    calls = 0

    def decide(messages: list[dict[str, Any]]) -> Outcome:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the isolate failed")
        return Outcome(ok=True)

    consumer = Consumer(decide)
    broker.consume(QueueConsumer("q", max_batch_timeout_ms=0), consumer)
    broker.start()
    await broker.send("q", [text("x")])
    await consumer.wait_batches(2)
    assert [b[0]["attempts"] for b in consumer.batches] == [1, 2]


async def test_messages_outlive_the_broker_and_undelivered_ones_come_back(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    first = QueueBroker(tmp_path, clock)
    await first.open()
    hold = asyncio.Event()  # never set: the batch is in flight when the broker stops
    stuck = Consumer(hold=hold)
    first.consume(QueueConsumer("q", max_batch_timeout_ms=0), stuck)
    first.start()
    await first.send("q", [text("a"), text("later", delay=60)])
    await stuck.wait_batches(1)
    await first.stop()

    second = QueueBroker(tmp_path, clock)
    await second.open()
    again = Consumer()
    second.consume(QueueConsumer("q", max_batch_timeout_ms=0), again)
    second.start()
    try:
        await again.wait_batches(1)
        assert [m["body"] for m in again.batches[0]] == [{"text": "a"}]
        assert again.batches[0][0]["id"] == stuck.batches[0][0]["id"]
        clock.advance(60_000)
        await again.wait_batches(2)
        assert [m["body"] for m in again.batches[1]] == [{"text": "later"}]
    finally:
        await second.stop()


async def test_a_queue_without_consumer_keeps_its_messages(broker: QueueBroker) -> None:
    answer = await broker.op_queue(
        {"queue": "lonely", "method": "send",
         "message": {"contentType": "json", "body": {"text": "[1]"}}}
    )  # fmt: skip
    assert answer["metadata"]["metrics"]["backlogCount"] == 1
    assert (await broker.op_queue({"queue": "lonely", "method": "metrics"}))["backlogBytes"] == 3


async def test_refused_sends_store_nothing(broker: QueueBroker) -> None:
    big = {"contentType": "text", "body": {"text": "x" * 128_001}}
    with pytest.raises(HostError, match="exceeds limit of 128000"):
        await broker.op_queue({"queue": "q", "method": "send", "message": big})
    ok = {"contentType": "text", "body": {"text": "x"}}
    with pytest.raises(HostError, match="message delay -1 is invalid"):
        await broker.op_queue(
            {"queue": "q", "method": "sendBatch", "messages": [ok], "delaySeconds": -1}
        )
    with pytest.raises(HostError, match="Unsupported queue message content type"):
        await broker.op_queue(
            {"queue": "q", "method": "sendBatch", "messages": [ok, {"contentType": "xml"}]}
        )
    assert await broker.store.index() == []


def row(broker: QueueBroker, queue: str) -> dict[str, Any]:
    return next(r for r in broker.queues() if r["queue"] == queue)


async def test_the_operator_view_counts_ready_delayed_in_flight_and_dead_letters(
    broker: QueueBroker,
) -> None:
    hold = asyncio.Event()
    consumer = Consumer(lambda messages: Outcome(ok=False), hold=hold)
    broker.consume(
        QueueConsumer("q", max_batch_size=2, max_batch_timeout_ms=0, max_retries=0,
                      max_concurrency=1, dead_letter_queue="dlq"),
        consumer,
        "worker-b",
    )  # fmt: skip
    await broker.send("nobody", [text("a"), text("b", delay=5)])
    await broker.send("q", [text("1"), text("2"), text("3"), text("4", delay=60)])
    assert row(broker, "nobody") | {"backlogBytes": 0} == {
        "queue": "nobody", "consumer": None, "depth": 2, "ready": 1, "delayed": 1,
        "inFlight": 0, "deadLettered": 0, "dropped": 0, "backlogBytes": 0,
    }  # fmt: skip
    broker.start()
    await consumer.wait_batches(1)  # two in flight (held), one ready, one delayed
    q = row(broker, "q")
    assert (q["consumer"], q["inFlight"], q["ready"], q["delayed"]) == ("worker-b", 2, 1, 1)
    assert q["depth"] == 2
    hold.set()
    await settled(broker, "q", 2)  # no retries: all three visible ones are dead-lettered
    q = row(broker, "q")
    assert (q["inFlight"], q["depth"], q["deadLettered"]) == (0, 1, 3)
    assert row(broker, "dlq")["depth"] == 3 and row(broker, "dlq")["consumer"] is None


async def test_a_queue_has_one_consumer_in_a_session(broker: QueueBroker) -> None:
    broker.consume(QueueConsumer("q"), Consumer(), "worker-a")
    with pytest.raises(ValueError, match="Worker worker-a"):
        broker.consume(QueueConsumer("q"), Consumer(), "worker-b")
    await broker.release(["q"])  # worker-a stops: another Worker may take the queue
    broker.consume(QueueConsumer("q"), Consumer(), "worker-b")


async def test_concurrent_sends_share_a_commit_and_each_resolves_once_stored(
    broker: QueueBroker, tmp_path: Path
) -> None:
    await asyncio.gather(*(broker.send("q", [text(str(i))]) for i in range(8)))
    assert broker.store.send_commits < 8
    assert broker.backlog("q").metrics()["backlogCount"] == 8
    again = QueueBroker(tmp_path, broker.clock)  # a second reader of the same file
    await again.open()
    try:
        stored = [m.seq for m in await again.store.index()]
        assert sorted(stored) == sorted(broker.backlog("q").messages)
    finally:
        await again.stop()
