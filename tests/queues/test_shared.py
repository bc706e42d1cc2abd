"""Two brokers of a `--workers 2` cluster on one real queue file, each owning the queues
celld.cluster.queues places on it, their `queue` calls joined directly (the channel between
processes is tested with real processes in tests/cluster/test_queues_workers.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from celld.cells.clock import ManualClock
from celld.cluster.queues import ProcessPlacement
from celld.project.queues import QueueConsumer
from celld.queues.broker import QueueBroker
from celld.queues.rules import Outcome
from tests.queues.test_broker import T0, Consumer, settled, text


def _named(owner: int, prefix: str) -> str:
    """A queue name process `owner` (of 2) owns."""
    probe = ProcessPlacement(0, 2, call=None)  # type: ignore[arg-type]
    return next(f"{prefix}{n}" for n in range(100) if probe.owner(f"{prefix}{n}") == owner)


async def _pair(tmp_path: Path) -> list[QueueBroker]:
    clock = ManualClock(T0)
    brokers: list[QueueBroker] = []

    async def call(owner: int, head: dict[str, Any]) -> None:
        await brokers[owner].adopt(head["queue"], head["seqs"])

    for index in range(2):
        broker = QueueBroker(tmp_path, clock)
        broker.placement = ProcessPlacement(index, 2, call)
        brokers.append(broker)
    for broker in brokers:
        await broker.open()
    return brokers


async def test_one_consumer_per_queue_and_sends_from_either_process(tmp_path: Path) -> None:
    brokers = await _pair(tmp_path)
    jobs, dead = _named(0, "jobs"), _named(1, "dead")
    config = QueueConsumer(jobs, max_batch_timeout_ms=0, max_retries=0, dead_letter_queue=dead)
    consumers = [Consumer(lambda m: Outcome(ok=m[0]["body"]["text"] != "bad")) for _ in brokers]
    dead_consumers = [Consumer() for _ in brokers]
    try:
        for broker, consumer, dead_consumer in zip(brokers, consumers, dead_consumers, strict=True):
            broker.consume(config, consumer)
            broker.consume(QueueConsumer(dead, max_batch_timeout_ms=0), dead_consumer)
            broker.start()
        await brokers[1].send(jobs, [text("from 1")])
        await brokers[0].send(jobs, [text("from 0")])
        await settled(brokers[0], jobs, 1)
        await consumers[0].wait_batches(1)
        while sum(len(b) for b in consumers[0].batches) < 2:
            await consumers[0].wait_batches(len(consumers[0].batches) + 1)
        bodies = sorted(m["body"]["text"] for b in consumers[0].batches for m in b)
        assert bodies == ["from 0", "from 1"]
        assert consumers[1].batches == []  # process 1 never consumes process 0's queue
        # A message told twice, after it was acknowledged, is not delivered again.
        seqs = [m.seq for m in await brokers[0].store.index()]
        assert seqs == []
        await brokers[0].adopt(jobs, [1, 2])
        assert brokers[0].backlog(jobs).messages == {}
        # A failed message moves to the dead letter queue, which the other process owns.
        await brokers[1].send(jobs, [text("bad")])
        await dead_consumers[1].wait_batches(1)
        assert [m["body"]["text"] for m in dead_consumers[1].batches[0]] == ["bad"]
        assert dead_consumers[0].batches == []
        await settled(brokers[1], dead, 1)
        assert await brokers[0].metrics(dead) == {
            "backlogCount": 0, "backlogBytes": 0, "oldestMessageTimestamp": 0,
        }  # fmt: skip
    finally:
        for broker in brokers:
            await broker.stop()


async def test_an_owner_reads_what_it_was_not_told(tmp_path: Path) -> None:
    brokers = await _pair(tmp_path)
    jobs = _named(0, "jobs")
    consumer = Consumer()
    brokers[1].placement.arrived = lambda queue, seqs: None  # type: ignore[method-assign]
    try:
        brokers[0].consume(QueueConsumer(jobs, max_batch_timeout_ms=0), consumer)
        brokers[0].start()
        await brokers[1].send(jobs, [text("untold")])  # its sender never tells the owner
        assert (await brokers[1].metrics(jobs))["backlogCount"] == 1
        await asyncio.wait_for(consumer.wait_batches(1), 15)  # the owner's next read
        assert [m["body"]["text"] for m in consumer.batches[0]] == ["untold"]
    finally:
        for broker in brokers:
            await broker.stop()
