"""The horizon scan reads only the deadlines past its previous horizon (celld/cells/manager.py,
`_scan_horizon`): hibernated instances due across many windows, one of them exactly on a
window's edge and one after the periodic full scan, each wake once, at their deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from celld.cells.clock import ManualClock
from celld.cells.manager import FULL_SCAN_MS, CellSettings
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, until

START = 1_700_000_000_000
WINDOW = 1_000  # residency: deadlines further out than this hibernate
WORKFLOW = "script-workflow"


async def test_deadlines_across_windows_each_wake_once(tmp_path: Path) -> None:
    clock = ManualClock(START)
    deadlines = {
        "a": START + 5_000,
        "b": START + 5_500,  # a scan's horizon falls on it when the clock steps by 500
        "c": START + 9_250,
        "d": START + 9_250,  # two due at the same moment
        "e": START + FULL_SCAN_MS + 7_000,  # after a full scan came round again
    }
    async with running_service(
        tmp_path / "state", cells=CellSettings(residency_ms=WINDOW), clock=clock
    ) as service:
        cells = service.cells
        assert cells is not None
        for instance_id, at in deadlines.items():
            ops = [{"do": "x"}, {"sleepUntil": "nap", "at": at}, {"do": "y"}]
            await call(service, WORKFLOW, "create", id=instance_id, params=params({"ops": ops}))
        refs = {i: InstanceRef(WORKFLOW, i) for i in deadlines}
        await until(
            lambda: all(
                cells.loaded(r) is None and cells.residency.queue.priority(r) is None
                for r in refs.values()
            ),
            "every sleeper hibernated",
        )
        fired = cells.alarms.fired
        now = START
        for instance_id, at in sorted(deadlines.items(), key=lambda item: item[1]):
            while now < at:  # in half windows: a scan runs at each step
                now = min(at, now + WINDOW // 2)
                clock.set(now)
                await asyncio.sleep(0.002)  # let the scan read the store
            ref = refs[instance_id]

            async def completed(ref: InstanceRef = ref) -> bool:
                status = await call(service, WORKFLOW, "status", id=ref.id)
                return bool(status["status"] == "complete")

            for _ in range(2000):
                if await completed():
                    break
                await asyncio.sleep(0.01)
            status = await call(service, WORKFLOW, "status", id=instance_id)
            assert status["status"] == "complete", (instance_id, status)
            assert orjson.loads(status["output"])["results"][1] == {"slept": "nap"}
        # one alarm per deadline: none armed again for a run already under way
        assert cells.alarms.fired - fired == len(deadlines)
