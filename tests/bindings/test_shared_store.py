"""KV and R2 in a shared PostgreSQL store, where several nodes use the same rows at once:
two sets of bindings on one database stand for two nodes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from celld.bindings import pgr2
from celld.bindings.pgr2 import PgR2Bucket
from celld.bindings.pgshared import SharedPool
from celld.bindings.registry import Bindings
from celld.cells.clock import ManualClock
from celld.isolate.host import HostError
from tests.bindings.harness import START_MS, storage_config


async def _node(dsn: str, tmp: Any) -> Bindings:
    bindings = Bindings(storage_config(tmp), tmp / "state", ManualClock(START_MS).now, shared=dsn)
    await bindings.open()
    return bindings


async def _pieces(data: bytes, size: int = 100_000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def test_two_nodes_share_keys_and_objects(postgres_dsn: str, tmp_path: Any) -> None:
    a, b = await _node(postgres_dsn, tmp_path / "a"), await _node(postgres_dsn, tmp_path / "b")
    try:
        await a.kv["kv-id"].put("k", b"from a", metadata='{"n":1}')
        assert (await b.kv["kv-id"].get(["k"], bulk=False))["k"]["metadata"] == '{"n":1}'
        body = os.urandom(2_500_000)  # several pages of chunks
        await a.r2["bucket"].put_stream("obj", _pieces(body), {})
        wire = await b.r2["bucket"].get("obj", {}, body=True, stream_over=64 * 1024)
        assert wire is not None and wire["size"] == len(body)
        reader = wire["file"]
        assert b"".join([piece async for piece in reader.chunks()]) == body
        ranged = await b.r2["bucket"].get(
            "obj", {"range": {"offset": 262_000, "length": 1000}}, body=True
        )
        assert ranged is not None
    finally:
        await a.close()
        await b.close()


async def test_a_conditional_create_wins_once_across_nodes(
    postgres_dsn: str, tmp_path: Any
) -> None:
    nodes = [await _node(postgres_dsn, tmp_path / f"n{i}") for i in range(2)]
    try:
        only_if_absent = {"onlyIf": {"etagDoesNotMatch": "*"}}
        results = await asyncio.gather(
            *(
                nodes[i % 2].r2["bucket"].put("lock", f"writer {i}".encode(), only_if_absent)
                for i in range(12)
            )
        )
        assert sum(r is not None for r in results) == 1
    finally:
        for node in nodes:
            await node.close()


async def _bodies(dsn: str) -> dict[int, str]:
    connection = await asyncpg.connect(dsn)
    try:
        return {r["id"]: r["state"] for r in await connection.fetch("SELECT * FROM r2_bodies")}
    finally:
        await connection.close()


async def test_a_replaced_body_is_read_to_its_end_then_swept(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = await SharedPool(postgres_dsn).open()
    bucket = await PgR2Bucket(shared, "b", ManualClock(START_MS).now).open()
    try:
        old = os.urandom(1_500_000)
        await bucket.put("k", old, {})
        wire = await bucket.get("k", {}, body=True, stream_over=0)
        assert wire is not None
        reader = wire["file"].chunks()
        first = await anext(reader)
        await bucket.put("k", b"new", {})  # replaces the body mid-read
        rest = [piece async for piece in reader]
        assert first + b"".join(rest) == old
        assert sorted((await _bodies(postgres_dsn)).values()) == ["dropped", "live"]
        # Past the grace, the dropped body goes; a reader that started before fails clearly.
        stale = await bucket.get("k", {}, body=True, stream_over=0)
        assert stale is not None
        await bucket.put("k", b"newer", {})
        monkeypatch.setattr(pgr2, "DROPPED_GRACE_S", 0)
        assert await bucket.sweep() == 2
        assert list((await _bodies(postgres_dsn)).values()) == ["live"]
        with pytest.raises(HostError, match="replaced or deleted while it was being read"):
            [piece async for piece in stale["file"].chunks()]
    finally:
        await shared.close()


async def test_a_dead_writers_body_is_swept_and_a_stalled_put_fails(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = await SharedPool(postgres_dsn).open()
    bucket = await PgR2Bucket(shared, "b", ManualClock(START_MS).now).open()
    swept = asyncio.Event()

    async def stalls() -> AsyncIterator[bytes]:
        yield os.urandom(1_100_000)  # one flush is written, then the writer waits
        monkeypatch.setattr(pgr2, "WRITING_IDLE_S", 0)
        assert await bucket.sweep() == 1  # taken for a dead writer's
        swept.set()
        yield b"the end"

    try:
        with pytest.raises(HostError, match="was idle for more than 0 s and was discarded"):
            await bucket.put_stream("k", stalls(), {})
        assert swept.is_set()
        assert await _bodies(postgres_dsn) == {}
        assert await bucket.get("k", {}, body=False) is None
    finally:
        await shared.close()
