"""A finished run's isolate goes to the next run, unless user code replaced built-ins in it
(the check runs once, as the isolate leaves its run)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, wait_for

HOSTILE = Path(__file__).resolve().parent.parent / "projects" / "hostile"


async def _finished_and_unloaded(service: object, instance_id: str) -> None:
    manager = service.cells  # type: ignore[attr-defined]
    await wait_for(service, "hostile-workflow", [instance_id], {"complete"}, timeout=30)  # type: ignore[arg-type]
    for _ in range(500):
        if manager.loaded(InstanceRef("hostile-workflow", instance_id)) is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{instance_id} stayed loaded")


async def test_an_isolate_with_patched_builtins_is_not_reused(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state", project=HOSTILE) as service:
        assert service.cells is not None
        warm = service.cells.isolates.warm
        await call(service, "hostile-workflow", "create", id="plain-1",
                   params=params({"kind": "plain"}))  # fmt: skip
        await _finished_and_unloaded(service, "plain-1")
        assert len(warm) == 1  # a clean isolate is kept for the next run
        await call(service, "hostile-workflow", "create", id="patcher",
                   params=params({"kind": "patch-at-end"}))  # fmt: skip
        await _finished_and_unloaded(service, "patcher")
        assert len(warm) == 0  # it took the warm one, patched it, and it was dropped
        await call(service, "hostile-workflow", "create", id="plain-2",
                   params=params({"kind": "plain"}))  # fmt: skip
        await _finished_and_unloaded(service, "plain-2")
        assert len(warm) == 1
        status = await call(service, "hostile-workflow", "status", id="plain-2")
        assert status["output"] == params({"pair": {"a": 5, "b": 6}, "list": [1, 2, 3]})
