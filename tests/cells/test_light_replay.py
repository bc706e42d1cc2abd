"""A hibernated instance comes back from a light load: only its unfinished rows become
Python objects, its finished steps reach JS as journal text the store builds, and run()
sees exactly what it saw before (values of every type, undefined, caught errors, events)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from celld.engine import Status
from celld.store.base import InstanceRef
from celld.store.sqlite import SqliteStore
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
    # names an object's prototype has, later calls of a name, a later call that failed
    {"do": "constructor", "value": "c", "once": True},
    {"do": "__proto__", "value": "p", "once": True},
    {"do": "toString", "returns": "undefined", "once": True},
    {"do": "repeat", "value": 3, "once": True},
    {"do": "doomed", "always": True, "error": "range", "catch": True,
     "config": {"retries": {"limit": 0, "delay": 1000}}},
    {"wait": "approval", "type": "approve"},
    {"do": "after", "value": "done"},
    {"do": "hasOwnProperty", "value": "h"},  # not in the journal: runs
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
        recorded = await service.store.journal(ref)
        first = orjson.loads("{" + recorded.first + "}")
        keyed = orjson.loads("{" + recorded.keyed + "}")
        assert len(first) == 13, sorted(first)
        assert sorted(keyed) == ["do:2:doomed", "do:2:repeat", "do:3:repeat"]
        rows_before = await service.store.load(ref)
        replayed = await finish(service, "hibernated")
        rows_after = await service.store.load(ref)
        # every recorded step came from the journal: none ran (or started) again
        assert rows_before is not None and rows_after is not None
        started = {row.key: (row.started_at, row.attempts) for row in rows_after.steps}
        for row in rows_before.steps:
            if row.key.type == "do":
                assert started[row.key] == (row.started_at, row.attempts), row.key

    assert replayed == resident
    results = resident["results"]
    assert results[0]["ctx"]["step"] == {"name": "first", "count": 1}
    assert results[2:4] == [1, 2]
    assert results[6] == {"caught": {"name": "TypeError", "message": "doomed failed on attempt 1"}}
    assert results[9:14] == [
        "c",
        "p",
        {"type": "undefined"},
        3,
        {"caught": {"name": "RangeError", "message": "doomed failed on attempt 1"}},
    ]
    assert results[14]["payload"] == {"ok": 1}
    assert results[15:] == ["done", "h"]


async def test_an_event_wakes_a_hibernated_instance_with_one_read_of_it(tmp_path: Path) -> None:
    """The cell the event loaded stays loaded until its run starts: the run does not read
    the instance from the store again (only its journal)."""
    state = tmp_path / "state"
    ops = [{"do": f"s{i}", "value": i} for i in range(20)] + [{"wait": "go", "type": "go"}]
    async with running_service(state) as service:
        await call(service, WORKFLOW, "create", id="w", params=params({"ops": ops}))
        await wait_for(service, WORKFLOW, ["w"], {"waiting"})

    async with running_service(state) as service:
        store = service.store
        assert isinstance(store, SqliteStore)
        ref = InstanceRef(WORKFLOW, "w")
        before = store.claims
        await call(service, WORKFLOW, "sendEvent", id="w", type="go", payload=params(1))
        for _ in range(2000):  # the store's own rows, not a status read (that loads a cell)
            loaded = await store.load(ref)
            if loaded is not None and loaded.state.status is Status.COMPLETE:
                break
            await asyncio.sleep(0.005)
        else:
            raise AssertionError("the instance did not complete")
        assert store.claims - before == 1
