"""A hibernated instance comes back from a light load: only its unfinished rows become
Python objects, its finished steps reach JS as journal text the store builds, and run()
sees exactly what it saw before (values of every type, undefined, caught errors, events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, wait_for

WORKFLOW = "script-workflow"
OPS: list[dict[str, Any]] = [
    {"do": "first", "ctx": True},
    {"parallel": [{"do": "left", "value": "L"}, {"do": "right", "returns": "map"}]},
    {"do": "repeat", "value": 1},
    {"do": "repeat", "value": 2},
    {"do": "nothing", "returns": "undefined"},
    {"do": "outer", "nested": [{"do": "inner", "value": "deep"}]},
    {"do": "doomed", "always": True, "error": "type", "catch": True,
     "config": {"retries": {"limit": 0, "delay": 1000}}},
    {"do": "typed", "returns": "nested"},
    {"do": "bytes", "returns": "u8"},
    {"wait": "approval", "type": "approve"},
    {"do": "after", "value": "done"},
]  # fmt: skip


async def finish(service: Any, instance_id: str) -> dict[str, Any]:
    await call(
        service, WORKFLOW, "sendEvent", id=instance_id, type="approve", payload=params({"ok": 1})
    )
    done = await wait_for(service, WORKFLOW, [instance_id], {"complete", "errored"})
    return orjson.loads(done[instance_id]["output"])


async def test_a_hibernated_instance_replays_from_the_stores_journal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with running_service(state) as service:
        for instance_id in ("resident", "hibernated"):
            await call(service, WORKFLOW, "create", id=instance_id, params=params({"ops": OPS}))
        await wait_for(service, WORKFLOW, ["resident", "hibernated"], {"waiting"})
        resident = await finish(service, "resident")

    async with running_service(state) as service:
        assert service.store is not None and service.cells is not None
        ref = InstanceRef(WORKFLOW, "hibernated")
        assert service.cells.loaded(ref) is None
        light = await service.store.claim(ref)
        assert light is not None and light.history_dropped
        assert [row.key.name for row in light.steps] == ["approval"]  # the wait only
        journal = orjson.loads("{" + await service.store.journal(ref) + "}")
        assert len(journal) == 11, str(sorted(journal))
        replayed = await finish(service, "hibernated")

    assert replayed == resident
    results = resident["results"]
    assert results[0]["ctx"]["step"] == {"name": "first", "count": 1}
    assert results[2:4] == [1, 2]
    assert results[6] == {"caught": {"name": "TypeError", "message": "doomed failed on attempt 1"}}
    assert results[9]["payload"] == {"ok": 1}
