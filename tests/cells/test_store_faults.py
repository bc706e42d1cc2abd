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

from celld.cells.clock import ManualClock
from celld.isolate.host import HostError
from celld.store.base import InstanceRef, JournalText
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


async def test_a_run_joining_an_isolate_condemned_in_an_outage_runs_once_the_store_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several runs share an isolate; one more joins it and, while it reads its journal,
    the store fails: a co-tenant's result is never committed and the isolate is
    condemned. The run that joined subscribed to the isolate's faults only after the
    fault, and its start waited for a turn a faulted isolate never takes: it stayed
    running for ever. It must hear of the fault, and every instance complete once the
    store commits again.

    The journal read of the joining run is held by the test (it waits for an event, then
    reads the real store), so the fault lands inside it every time."""
    clock = ManualClock()
    async with running_service(tmp_path / "state", clock=clock) as service:
        store, cells = service.store, service.cells
        assert store is not None and cells is not None
        # the joiner: a step, then an hour's sleep (paused meanwhile: its run stops)
        await call(service, "long-workflow", "create", id="joiner",
                   params=params({"steps": 1, "sleepEvery": 1, "nap": "1 hour"}))  # fmt: skip
        await wait_for(service, "long-workflow", ["joiner"], {"waiting"})
        await call(service, "long-workflow", "pause", id="joiner")
        await wait_for(service, "long-workflow", ["joiner"], {"paused"})
        # two runs stepping in one shared isolate
        busy = ["busy-0", "busy-1"]
        for instance_id in busy:
            await call(service, "long-workflow", "create", id=instance_id,
                       params=params({"steps": 2000}))  # fmt: skip
        commits = store.commits
        await until(lambda: store.commits >= commits + 20, "the busy runs stepping")

        joiner = InstanceRef("long-workflow", "joiner")
        reading, read_on = asyncio.Event(), asyncio.Event()
        real_journal = store.journal

        async def held_journal(ref: InstanceRef) -> JournalText:
            if ref == joiner:
                reading.set()
                await read_on.wait()
            return await real_journal(ref)

        monkeypatch.setattr(store, "journal", held_journal)
        await call(service, "long-workflow", "resume", id="joiner")  # its run starts
        await asyncio.wait_for(reading.wait(), 30)
        hosts = [host for host, _ in cells.isolates._shared]
        assert len(hosts) == 1 and len(hosts[0].tenants) == 3, "the joiner joined the busy runs"
        shared = hosts[0]

        store.fault = disk_full
        await until(lambda: shared.faulted, "the busy runs' isolate condemned", timeout=60)
        joining = cells.residency.get(joiner)
        assert joining is not None and joining.run is None  # still reading its journal
        read_on.set()
        # it hears of the fault, moves off the isolate, and its start's commit fails
        await until(lambda: joining.broken, "the joiner dropped after its commit failed", 60)
        store.fault = None

        final = await wait_for(service, "long-workflow", busy, {"complete", "errored"})
        for instance_id in busy:
            assert final[instance_id] == {
                "status": "complete",
                "output": params({"total": expected_total(2000), "steps": 2000}),
            }
        # the joiner runs again from its rows: back to its sleep, then on to the end
        await wait_for(service, "long-workflow", ["joiner"], {"waiting"})
        clock.advance(2 * 3600 * 1000)
        final = await wait_for(service, "long-workflow", ["joiner"], {"complete", "errored"})
        assert final["joiner"] == {
            "status": "complete", "output": params({"total": 1, "steps": 1})
        }  # fmt: skip


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
