"""Memory stays bounded: queued runs are references, startup pages runnable instances in
from the store, and a burst of creates never loads more cells than the slots allow, besides
the cells just created whose first run is queued (at most as many as the queue holds)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from celld.cells.manager import CellSettings
from celld.server.service import Service
from tests.inprocess import call, params, running_service

SETTINGS = CellSettings(max_resident=4, queue_capacity=50)


async def watch_until_complete(service: Service, total: int) -> tuple[int, int]:
    """Poll until `total` instances are complete; the largest queue and loaded-cell
    counts seen meanwhile."""
    assert service.cells is not None and service.store is not None
    most_queued = most_loaded = 0
    for _ in range(12_000):
        most_queued = max(most_queued, service.cells.run_queue_length)
        most_loaded = max(most_loaded, len(service.cells.cells))
        if (await service.store.counts()).get("complete", 0) == total:
            return most_queued, most_loaded
        await asyncio.sleep(0.01)
    raise AssertionError(f"not complete: {await service.store.counts()}")


async def test_a_burst_of_creates_loads_only_what_runs(tmp_path: Path) -> None:
    total = 1_500
    async with running_service(tmp_path / "state", cells=SETTINGS) as service:
        batches = [
            call(service, "long-workflow", "createBatch",
                 instances=[{"id": f"b{n}-{i}", "params": params({"steps": 2})}
                            for i in range(100)])
            for n in range(total // 100)
        ]  # fmt: skip
        watcher = asyncio.ensure_future(watch_until_complete(service, total))
        await asyncio.gather(*batches)
        most_queued, most_loaded = await watcher
        assert most_queued <= SETTINGS.queue_capacity
        assert most_loaded <= 3 * SETTINGS.max_resident + SETTINGS.queue_capacity


async def test_startup_pages_runnable_instances_in(tmp_path: Path) -> None:
    total = 1_000
    state = tmp_path / "state"
    stopped = CellSettings(max_resident=1, queue_capacity=1)
    async with running_service(state, cells=stopped) as service:
        for n in range(total // 100):
            await call(service, "long-workflow", "createBatch",
                       instances=[{"id": f"s{n}-{i}", "params": params({"steps": 2})}
                                  for i in range(100)])  # fmt: skip
        assert service.store is not None
        counts = await service.store.counts()
    assert counts.get("queued", 0) + counts.get("running", 0) > total // 2  # left runnable
    async with running_service(state, cells=SETTINGS) as service:
        most_queued, most_loaded = await watch_until_complete(service, total)
    assert most_queued <= SETTINGS.queue_capacity
    assert most_loaded <= 3 * SETTINGS.max_resident


async def test_steps_leave_no_host_work_behind(tmp_path: Path) -> None:
    """300 steps, then a sleep: the parked run holds one pending host request, the sleep's
    (not one per step, as a timer per attempt used to leave)."""
    from celld.store.base import InstanceRef

    async with running_service(tmp_path / "state") as service:
        assert service.cells is not None
        await call(service, "long-workflow", "create", id="l",
                   params=params({"steps": 300, "sleepEvery": 300}))  # fmt: skip
        for _ in range(3_000):
            cell = service.cells.loaded(InstanceRef("long-workflow", "l"))
            if cell is not None and cell.run is not None and cell.parked:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the instance never parked on its sleep")
        host = cell.run.host
        await host.wait_idle()
        assert host.outstanding == 1
        assert len(cell.run.waiters) == 1
        assert cell.machine.unfinished_steps()[0].name == "nap"
        assert len(service.cells.tasks) <= 5  # its own loops and at most one bookkeeping task


async def test_a_step_attempt_has_one_cpu_budget_over_all_its_turns(tmp_path: Path) -> None:
    """50 ms slices between timers never trip the per-job limit, but the attempt's CPU
    (limits.cpu_ms = 1000 in this project) is counted across them."""
    from tests.inprocess import wait_for

    async with running_service(tmp_path / "state") as service:
        await call(service, "cpu-hog-workflow", "create", id="hog")
        final = await wait_for(service, "cpu-hog-workflow", ["hog"], {"errored", "complete"})
        assert final["hog"]["status"] == "errored"
        assert "CPU time limit exceeded" in final["hog"]["error"]["message"]
