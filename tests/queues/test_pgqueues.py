"""Queues on two nodes of one real PostgreSQL database (two PostgresStores in one test
process, each with its own lease): one node claims a consumed queue, the other's sends
reach it, and a settle by a node that does not hold the queue writes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from celld.cells.clock import ManualClock
from celld.project.queues import QueueConsumer
from celld.queues.broker import QueueBroker
from celld.queues.pgqueues import (
    NodePlacement,
    PgQueueStore,
    notifications,
    place_on_nodes,
    read_notification,
)
from celld.queues.placement import QueueFenced
from celld.queues.store import NewMessage
from celld.store.postgres import PostgresStore
from tests.queues.test_broker import T0, Consumer, text


async def test_one_node_consumes_and_a_fenced_settle_writes_nothing(
    tmp_path: Path, postgres_dsn: str
) -> None:
    clock = ManualClock(T0)
    stores = [PostgresStore(postgres_dsn, lease_ms=2000) for _ in range(2)]
    brokers, consumers = [], []
    try:
        for store in stores:
            await store.open()
            broker = QueueBroker(tmp_path, clock)
            place_on_nodes(broker, store)
            await broker.open()
            consumer = Consumer()
            broker.consume(QueueConsumer("jobs", max_batch_timeout_ms=0), consumer)
            broker.start()
            await broker.claim()
            brokers.append(broker)
            consumers.append(consumer)
        held = [b.placement.owns("jobs") for b in brokers]
        assert all(isinstance(b.placement, NodePlacement) for b in brokers)
        assert held == [True, False]  # the first to claim holds it; the other does not
        await brokers[1].send("jobs", [text("from the other node")])
        await asyncio.wait_for(consumers[0].wait_batches(1), 10)
        assert [m["body"]["text"] for m in consumers[0].batches[0]] == ["from the other node"]
        assert consumers[1].batches == []
        # A node that does not hold the queue cannot settle its messages.
        other = brokers[1].store
        assert isinstance(other, PgQueueStore)
        later = NewMessage("jobs", "held-back", T0, "text", b"held back", T0 + 3_600_000)
        (seq,) = await other.add([later])  # (visible in an hour: the owner leaves it)
        with pytest.raises(QueueFenced, match="consumed by node"):
            await other.settle("jobs", [seq], [], [])
        assert [m.seq for m in await other.rows("jobs", [seq])] == [seq]
    finally:
        for broker in brokers:
            await broker.stop()
        for store in stores:
            await store.close()


def test_notifications_stay_under_the_payload_limit_and_read_back() -> None:
    seqs = list(range(10**12, 10**12 + 1000))
    payloads = notifications("a-queue", seqs)
    assert len(payloads) > 1 and all(len(p.encode()) < 8000 for p in payloads)
    read = [read_notification(p) for p in payloads]
    assert {queue for queue, _ in read} == {"a-queue"}
    assert [seq for _, chunk in read for seq in chunk] == seqs
