"""Runs are admitted at the pace they settle, and pass isolates along instead of creating
one each; created instances start without being read back; hibernated deadlines queue
their run without reading the instance first."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from celld.cells import residency
from celld.cells.clock import ManualClock
from celld.cells.manager import MAX_YOUNG, CellSettings
from celld.cells.residency import YOUNG_MS, Residency
from celld.cells.runqueue import Priority
from celld.cells.warm import WarmIsolates
from celld.isolate.isolate import Isolate
from celld.isolate.threads import JsThreadPool
from celld.project.config import find_config, load_config
from celld.server.service import Service, ServiceOptions
from celld.store.base import InstanceRef
from tests.inprocess import DURABLE, call, params, running_service, wait_for

LONG = "long-workflow"
START_MS = 1_800_000_000_000


@contextmanager
def counting_claims(service: Service) -> Iterator[list[int]]:
    """Count the instances the cells read from the real store (`claim`, and each instance
    of a `claim_many`: the runs of one admission pass are read together)."""
    store: Any = service.store
    original, original_many = store.claim, store.claim_many
    seen = [0]

    async def claim(ref: Any) -> Any:
        seen[0] += 1
        return await original(ref)

    async def claim_many(refs: list[Any]) -> Any:
        seen[0] += len(refs)
        return await original_many(refs)

    store.claim, store.claim_many = claim, claim_many
    try:
        yield seen
    finally:
        store.claim, store.claim_many = original, original_many


async def create_sleepers(service: Service, prefix: str, total: int, nap: str) -> list[str]:
    ids = [f"{prefix}{i}" for i in range(total)]
    payload = params({"steps": 1, "sleepEvery": 1, "nap": nap})
    await asyncio.gather(
        *(
            call(service, LONG, "createBatch",
                 instances=[{"id": i, "params": payload} for i in ids[start : start + 100]])
            for start in range(0, total, 100)
        )
    )  # fmt: skip
    return ids


async def settled(service: Service, status: str, total: int, timeout: float = 120) -> None:
    """Until `total` instances have `status` in the store and none is resident or queued
    (read from the store's counts: a status call would load the instances)."""
    cells, store = service.cells, service.store
    assert cells is not None and store is not None
    deadline = time.monotonic() + timeout
    while True:
        quiet = not cells.resident_count and not cells.run_queue_length
        if quiet and (await store.counts()).get(status, 0) == total:
            return
        assert time.monotonic() < deadline, f"not settled: {await store.counts()}"
        await asyncio.sleep(0.02)


async def test_a_burst_of_sleepers_passes_isolates_along(tmp_path: Path) -> None:
    """600 instances run to a day-long sleep and hibernate: they share a few dozen
    isolates (every one of them used to create its own)."""
    total = 600
    async with running_service(tmp_path / "state", js_threads=1) as service:
        assert service.cells is not None
        source = service.cells.isolates
        before = source.created
        with counting_claims(service) as claims:
            ids = await create_sleepers(service, "b", total, "1 day")
            await settled(service, "waiting", total)
        created = source.created - before
        assert created <= total // 4, f"{created} isolates created for {total} runs"
        # a created instance's first run uses the cell the create made (no read back)
        assert claims[0] == 0
        statuses = await wait_for(service, LONG, ids, {"waiting"})
        assert all(s["status"] == "waiting" for s in statuses.values())


async def test_created_cells_held_for_their_runs_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `MAX_HELD` created cells waiting for their first run, the rest are not kept
    loaded (their run reads the instance back, once): a burst's memory stays bounded, and
    every instance still runs to its sleep."""
    monkeypatch.setattr(residency, "MAX_HELD", 40)
    total = 300  # three createBatch calls of 100 at once: far more queued than 40 + young
    async with running_service(tmp_path / "state", js_threads=1) as service:
        assert service.cells is not None
        with counting_claims(service) as claims:
            ids = await create_sleepers(service, "h", total, "1 day")
            await settled(service, "waiting", total)
        assert 0 < claims[0] <= total - 40
        statuses = await wait_for(service, LONG, ids, {"waiting"})
        assert all(s["status"] == "waiting" for s in statuses.values())


async def test_a_run_that_stays_busy_does_not_hold_new_runs_back(tmp_path: Path) -> None:
    """More runs than may be young at once never settle (StuckWorkflow awaits forever
    outside a step); an instance created after them still runs to completion."""
    stuck = MAX_YOUNG + 8
    async with running_service(tmp_path / "state", js_threads=1) as service:
        assert service.cells is not None
        await call(service, "stuck-workflow", "createBatch",
                   instances=[{"id": f"s{i}"} for i in range(stuck)])  # fmt: skip
        await call(service, LONG, "create", id="late", params=params({"steps": 2}))
        done = await wait_for(service, LONG, ["late"], {"complete"}, timeout=60)
        assert json.loads(done["late"]["output"]) == {"total": 3, "steps": 2}
        assert service.cells.resident_count >= stuck  # the stuck runs are all still there


async def test_hibernated_deadlines_start_their_runs_reading_each_instance_once(
    tmp_path: Path,
) -> None:
    """300 sleepers beyond the residency window hibernate; when their deadlines come (all
    at once), each is read once (by its run's start), however often its alarm fires."""
    total = 300
    clock = ManualClock(START_MS)
    options = ServiceOptions(
        persist_to=tmp_path / "state", js_threads=2, clock=clock,
        cells=CellSettings(residency_ms=500),
    )  # fmt: skip
    service = Service(load_config(find_config(DURABLE, None)), options)
    await service.start()
    try:
        ids = await create_sleepers(service, "h", total, "1 hour")
        await settled(service, "waiting", total)
        with counting_claims(service) as claims:
            clock.advance(3_600_000)
            await settled(service, "complete", total)
        done = await wait_for(service, LONG, ids, {"complete"})
        assert all(json.loads(d["output"]) == {"total": 1, "steps": 1} for d in done.values())
        # before, each wake-up read its instance at least twice (the alarm, then the run)
        assert claims[0] <= total, f"{claims[0]} reads for {total} wake-ups"
    finally:
        await service.stop()


def test_warm_isolates_idle_for_long_are_handed_back_oldest_first() -> None:
    threads = JsThreadPool(1)
    try:
        warm = WarmIsolates(capacity=10)
        isolates = [Isolate(threads.threads[0]) for _ in range(6)]
        for isolate in isolates:
            assert warm.give(isolate) is None
        assert warm.take() is isolates[-1]  # the most recently given serves first
        assert warm.surplus(keep=2, idle_s=3600) == []  # none idle for an hour
        assert warm.surplus(keep=2, idle_s=0) == isolates[:3]
        assert len(warm) == 2
    finally:
        threads.shutdown()


async def test_a_full_young_set_looks_again_when_its_first_comes_of_age() -> None:
    """With every young slot taken and the bound for the first coming of age still ahead,
    a dispatch must leave a timer behind: a timer armed for an earlier bound (or firing a
    hair early) once left none, and the queued run waited for an unrelated event."""
    loaded: list[InstanceRef] = []

    async def load(ref: InstanceRef) -> None:
        loaded.append(ref)  # no cell: the run is dropped once admitted, which is enough

    async def start(cell: Any, priority: Priority) -> None:
        raise AssertionError("no cell is ever loaded here")

    tasks: list[asyncio.Task[Any]] = []
    residency = Residency(
        load, start, lambda work, _what: tasks.append(asyncio.ensure_future(work)),
        lambda _ref: None, max_resident=10, queue_capacity=10, max_young=1,
    )  # fmt: skip
    now = time.monotonic()
    elder = InstanceRef(LONG, "elder")
    residency._young[elder] = now - YOUNG_MS / 1000 + 0.05  # comes of age in 50 ms
    residency._young_next = now + 0.05
    waiting = InstanceRef(LONG, "waiting")
    residency.request_run(waiting, Priority.NEW)
    assert loaded == []  # held back: the young set is full
    deadline = time.monotonic() + 5
    while not loaded and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert loaded == [waiting]
    await asyncio.gather(*tasks)
