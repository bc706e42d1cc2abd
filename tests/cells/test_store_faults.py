"""A failing store never fails a workflow (issue: correct under faults).

Real isolates and a real SQLite store; faults are raised from the store's write path
(`SqliteStore.fault`, called on the writer thread before each commit, as a full disk
or an I/O error would fail it).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from celld.isolate.host import HostError
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, until, wait_for


def disk_full() -> None:
    raise sqlite3.OperationalError("database or disk is full")


def expected_total(steps: int) -> int:
    return steps * (steps + 1) // 2


async def test_a_full_disk_for_a_while_fails_no_instance(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state") as service:
        assert service.store is not None and service.cells is not None
        ids = [f"long-{n}" for n in range(10)]
        for instance_id in ids:
            await call(service, "long-workflow", "create", id=instance_id,
                       params=params({"steps": 300}))  # fmt: skip
        store = service.store
        await until(lambda: store.commits >= 50, "the instances running their steps")
        store.fault = disk_full
        # a few refused commits: the instances' own and the store's probes
        await until(lambda: store.health.failures >= 5, "commits refused", timeout=60)
        assert not store.health.healthy
        store.fault = None
        final = await wait_for(service, "long-workflow", ids, {"complete", "errored"})
        assert service.store.health.healthy
        for instance_id in ids:
            assert final[instance_id] == {
                "status": "complete",
                "output": params({"total": expected_total(300), "steps": 300}),
            }
            described = await service.cells.describe("long-workflow", instance_id)
            assert described is not None
            steps = described["steps"]
            assert len(steps) == 300 and all(s["state"] == "done" for s in steps)


async def test_binding_calls_during_an_outage_change_nothing(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state") as service:
        assert service.store is not None
        await call(service, "long-workflow", "create", id="kept",
                   params=params({"steps": 2, "sleepEvery": 1}))  # fmt: skip
        await wait_for(service, "long-workflow", ["kept"], {"waiting"})
        service.store.fault = disk_full
        with pytest.raises(HostError, match=r"store\.unavailable.*retry"):
            await call(service, "long-workflow", "create", id="new", params=params({"steps": 1}))
        with pytest.raises(HostError, match=r"store\.unavailable"):
            await call(service, "long-workflow", "pause", id="kept")
        with pytest.raises(HostError, match=r"store\.unavailable"):
            await call(service, "long-workflow", "createBatch",
                       instances=[{"id": "b1"}, {"id": "b2"}])  # fmt: skip
        service.store.fault = None
        await service.store.probe()
        for missing in ("new", "b1", "b2"):
            assert not await service.store.exists(InstanceRef("long-workflow", missing))
        status = await call(service, "long-workflow", "status", id="kept")
        assert status["status"] in ("waiting", "running", "complete")
        final = await wait_for(service, "long-workflow", ["kept"], {"complete"}, timeout=30)
        assert final["kept"]["output"] == params({"total": 3, "steps": 2})


async def test_create_and_create_batch_racing_for_ids_give_one_instance_each(
    tmp_path: Path,
) -> None:
    async with running_service(tmp_path / "state") as service:
        ids = [f"r{n}" for n in range(30)]
        one_by_one = [
            call(service, "long-workflow", "create", id=i, params=params({"steps": 3})) for i in ids
        ]
        batch = call(
            service, "long-workflow", "createBatch", report=True,
            instances=[{"id": i, "params": params({"steps": 3})} for i in reversed(ids)],
        )  # fmt: skip
        results = await asyncio.gather(*one_by_one, batch, return_exceptions=True)
        singles, report = results[:-1], results[-1]
        assert isinstance(report, dict)
        won_single = {i for i, r in zip(ids, singles, strict=True) if isinstance(r, dict)}
        lost_single = {i for i, r in zip(ids, singles, strict=True) if isinstance(r, HostError)}
        assert won_single | lost_single == set(ids)
        assert all("already_exists" in str(r) for r in singles if isinstance(r, HostError))
        assert set(report["created"]) == lost_single  # each id created exactly once
        assert {e["id"] for e in report["errors"]} == won_single
        final = await wait_for(service, "long-workflow", ids, {"complete"})
        assert all(s["output"] == params({"total": 6, "steps": 3}) for s in final.values())
