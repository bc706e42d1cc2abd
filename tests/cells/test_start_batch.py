"""Runs admitted together start together (celld/cells/startbatch.py): one JS turn of
their isolate delivers every start, a run whose code throws ends alone, and a batch
whose commit fails loses nothing acknowledged.

Real isolates and a real SQLite store; the store fault is raised from its write path
(`SqliteStore.fault`, as a full disk would fail it).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from celld.cells.isolates import MAX_TENANTS
from tests.inprocess import call, params, running_service, until, wait_for

WORKFLOW = "script-workflow"
SLEEPER = [{"do": "before"}, {"sleep": "nap", "duration": "1 day"}]


def disk_full() -> None:
    raise sqlite3.OperationalError("database or disk is full")


async def warm_isolate(service: Any) -> None:
    """One run to its end, so that its isolate waits in the warm pool (room for a batch)."""
    await call(service, WORKFLOW, "create", id="warm", params=params({"ops": [{"do": "a"}]}))
    await wait_for(service, WORKFLOW, ["warm"], {"complete"}, 60)
    isolates = service.cells.isolates
    await until(lambda: len(isolates.warm) >= 1 and isolates.serving == 0, "the isolate warm")


async def test_a_batch_starts_in_one_turn_and_a_throwing_run_ends_alone(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state", js_threads=1) as service:
        assert service.cells is not None
        await warm_isolate(service)
        counts = service.cells.start_counts
        before = (counts.batches, counts.runs, counts.turns)
        sleepers = [f"s{n}" for n in range(MAX_TENANTS - 1)]
        instances = [{"id": i, "params": params({"ops": SLEEPER})} for i in sleepers]
        instances.append({"id": "thrower", "params": params({"ops": [{"throw": "boom"}]})})
        await call(service, WORKFLOW, "createBatch", instances=instances)
        asleep = await wait_for(service, WORKFLOW, sleepers, {"waiting", "errored"}, 60)
        assert all(s["status"] == "waiting" for s in asleep.values()), asleep
        thrown = await wait_for(service, WORKFLOW, ["thrower"], {"errored", "complete"}, 60)
        assert thrown["thrower"]["status"] == "errored"
        assert "boom" in str(thrown["thrower"]["error"])
        # the eight runs were admitted in one pass and started together: one batch, and
        # one turn of their one isolate delivered every start
        after = (counts.batches, counts.runs, counts.turns)
        assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (
            1,
            MAX_TENANTS,
            1,
        )
        for instance_id in sleepers:
            described = await service.cells.describe(WORKFLOW, instance_id)
            assert described is not None
            steps = {s["name"]: s for s in described["steps"]}
            assert steps["before"]["state"] == "done"


async def test_a_batch_whose_commit_fails_loses_nothing_and_recovers(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state", js_threads=1) as service:
        assert service.cells is not None and service.store is not None
        store = service.store
        await warm_isolate(service)
        counts = service.cells.start_counts
        batches = counts.batches
        ids = [f"f{n}" for n in range(MAX_TENANTS)]
        instances = [{"id": i, "params": params({"ops": SLEEPER})} for i in ids]
        await call(service, WORKFLOW, "createBatch", instances=instances)
        # created (acknowledged); every commit of their starts fails from now on
        store.fault = disk_full
        await until(lambda: counts.batches > batches, "the batch started", timeout=60)
        await until(lambda: store.health.failures >= 1, "the batch's commit refused", timeout=60)
        store.fault = None
        final = await wait_for(service, WORKFLOW, ids, {"waiting", "errored", "complete"}, 120)
        assert all(s["status"] == "waiting" for s in final.values()), final
        for instance_id in ids:
            described = await service.cells.describe(WORKFLOW, instance_id)
            assert described is not None
            steps = [s for s in described["steps"] if s["name"] == "before"]
            assert len(steps) == 1 and steps[0]["state"] == "done", described["steps"]
