"""While a pause is pending no attempt starts, not even one JS could start on its own."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from celld.server.service import Service
from celld.store.base import InstanceRef
from tests.e2e.counter import counter_server
from tests.inprocess import call, params, running_service, until, wait_for


async def step_state(service: Service, name: str) -> str | None:
    assert service.cells is not None
    described = await service.cells.describe("pause-race-workflow", "p")
    assert described is not None
    return next((s["state"] for s in described["steps"] if s["name"] == name), None)


async def test_no_callback_runs_while_a_pause_is_pending(tmp_path: Path) -> None:
    with counter_server() as counter:
        async with running_service(tmp_path / "state") as service:
            cells = service.cells
            assert cells is not None
            await call(service, "pause-race-workflow", "create", id="p",
                       params=params({"upstream": counter.url}))  # fmt: skip
            # "warm" done and "slow" in flight (800 ms): JS waits 300 ms before "after"
            deadline = time.monotonic() + 20
            while await step_state(service, "warm") != "done":
                assert time.monotonic() < deadline, "the step warm never finished"
                await asyncio.sleep(0.005)
            await call(service, "pause-race-workflow", "pause", id="p")
            status = await call(service, "pause-race-workflow", "status", id="p")
            assert status["status"] == "waitingForPause"
            await wait_for(service, "pause-race-workflow", ["p"], {"paused"}, timeout=20)
            # Paused: the run is over (its cell is out of memory, its isolate back in the
            # warm pool), so nothing of it runs any more, and the step after the pause did
            # not start.
            ref = InstanceRef("pause-race-workflow", "p")
            isolates = cells.isolates
            await until(
                lambda: cells.loaded(ref) is None and len(isolates.warm) == isolates.created,
                "the paused run stopped and gave its isolate back",
            )
            assert counter.values("after") == []
            await call(service, "pause-race-workflow", "resume", id="p")
            final = await wait_for(service, "pause-race-workflow", ["p"], {"complete"}, timeout=20)
            assert final["p"]["output"] == params(["slow", "after"])
            assert counter.values("after") == ["p"]
