"""Runs turn on the event-loop thread; one whose turn computes too long for the loop is
stopped there and goes on by replay on a JS thread, without a failed attempt."""

from __future__ import annotations

from pathlib import Path

import orjson

from celld.cells.manager import CellSettings
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, wait_for


async def test_a_step_too_long_for_the_event_loop_moves_to_a_js_thread(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state") as service:
        assert service.cells is not None and service.store is not None
        await call(service, "busy-step-workflow", "create", id="busy", params=params({"ms": 60}))
        await call(service, "busy-step-workflow", "create", id="light", params=params({"ms": 0}))
        final = await wait_for(service, "busy-step-workflow", ["busy", "light"], {"complete"})
        expected = {"before": "quick", "spun": True, "after": "quick"}
        assert (
            orjson.loads(final["busy"]["output"])
            == orjson.loads(final["light"]["output"])
            == expected
        )
        busy = InstanceRef("busy-step-workflow", "busy")
        assert not service.cells.runs_inline(busy)
        assert service.cells.runs_inline(InstanceRef("busy-step-workflow", "light"))
        rows = {}
        for instance_id in ("busy", "light"):
            loaded = await service.store.load(InstanceRef("busy-step-workflow", instance_id))
            assert loaded is not None
            spin = next(step for step in loaded.steps if step.name == "spin")
            rows[instance_id] = (spin.state, spin.attempts, spin.error)
        # The stopped turn was not an attempt: the busy step's row is the light one's.
        assert rows["busy"] == rows["light"]
        assert rows["busy"][2] is None


async def test_with_inline_turns_off_every_run_uses_js_threads(tmp_path: Path) -> None:
    settings = CellSettings(inline_turns=False)
    async with running_service(tmp_path / "state", cells=settings) as service:
        assert service.cells is not None
        await call(service, "busy-step-workflow", "create", id="light", params=params({"ms": 0}))
        final = await wait_for(service, "busy-step-workflow", ["light"], {"complete"})
        assert orjson.loads(final["light"]["output"])["after"] == "quick"
        assert not service.cells.runs_inline(InstanceRef("busy-step-workflow", "light"))
