"""While a pause is pending no attempt starts, not even one JS could start on its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.counter import counter_server
from tests.inprocess import call, params, running_service, wait_for


async def test_no_callback_runs_while_a_pause_is_pending(tmp_path: Path) -> None:
    with counter_server() as counter:
        async with running_service(tmp_path / "state") as service:
            await call(service, "pause-race-workflow", "create", id="p",
                       params=params({"upstream": counter.url}))  # fmt: skip
            await asyncio.sleep(0.12)  # "slow" is in flight, "warm" done, JS waits 300 ms
            await call(service, "pause-race-workflow", "pause", id="p")
            status = await call(service, "pause-race-workflow", "status", id="p")
            assert status["status"] == "waitingForPause"
            await wait_for(service, "pause-race-workflow", ["p"], {"paused"}, timeout=20)
            await asyncio.sleep(0.3)
            assert counter.values("after") == []  # the step after the pause did not start
            await call(service, "pause-race-workflow", "resume", id="p")
            final = await wait_for(service, "pause-race-workflow", ["p"], {"complete"}, timeout=20)
            assert final["p"]["output"] == params(["slow", "after"])
            assert counter.values("after") == ["p"]
