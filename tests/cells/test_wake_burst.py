"""Many hibernated instances due at the same moment (issue 24's wake-lag target, measured by
`bench/run.py --only wake_due_at_once`): every one wakes once and completes, and a restart in
the middle of the burst loses none of them and runs none of their steps twice.

The deadline is reached with the manual clock, so nothing here depends on how fast this
machine is; the instances are real runs in real QuickJS isolates on a real SQLite file.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson

from celld.cells.clock import ManualClock
from celld.cells.manager import CellSettings
from celld.cells.runqueue import Priority
from celld.server.service import Service
from tests.inprocess import call, params, running_service, until

START = 1_700_000_000_000
WINDOW = 1_000  # residency: the sleepers hibernate, their deadline being further out
DUE = START + 60_000
WORKFLOW = "script-workflow"
OPS = [{"do": "before"}, {"sleepUntil": "nap", "at": DUE}, {"do": "after"}]


def disk_full() -> None:
    raise sqlite3.OperationalError("database or disk is full")


async def _count(service: Service, sql: str) -> int:
    store: Any = service.store
    rows = await store._fetch(sql, (WORKFLOW,))
    return int(rows[0]["n"])


async def _statuses(service: Service) -> dict[str, int]:
    store: Any = service.store
    rows = await store._fetch(
        "SELECT status, count(*) AS n FROM instances WHERE workflow = ? GROUP BY status",
        (WORKFLOW,),
    )
    return {str(r["status"]): int(r["n"]) for r in rows}


async def _eventually(service: Service, check: Any, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what} ({await _statuses(service)})")
        await asyncio.sleep(0.05)


async def _create_sleepers(service: Service, n: int) -> list[str]:
    ids = [f"due{i}" for i in range(n)]
    payload = params({"ops": OPS})
    for at in range(0, n, 100):
        chunk = [{"id": i, "params": payload} for i in ids[at : at + 100]]
        await call(service, WORKFLOW, "createBatch", instances=chunk)
    cells = service.cells
    assert cells is not None

    async def asleep() -> bool:
        waiting = (await _statuses(service)).get("waiting", 0) == n
        return waiting and not cells.resident_count and not cells.run_queue_length

    await _eventually(service, asleep, f"all {n} asleep and hibernated")
    return ids


async def _after_steps(service: Service) -> int:
    """Finished `after` step rows: one per instance that ran past its sleep."""
    return await _count(
        service,
        "SELECT count(*) AS n FROM steps WHERE workflow = ? AND name = 'after' AND state = 'done'",
    )


async def test_a_thousand_due_at_once_all_wake_once_and_complete(tmp_path: Path) -> None:
    n = 1_000
    clock = ManualClock(START)
    async with running_service(
        tmp_path / "state", cells=CellSettings(residency_ms=WINDOW), clock=clock
    ) as service:
        cells = service.cells
        assert cells is not None
        ids = await _create_sleepers(service, n)
        assert await _after_steps(service) == 0
        fired = cells.alarms.fired
        # the horizon scan sees them half a window ahead (and preloads some), then all are
        # due while preload starts are under way: a start that began before the deadline
        # must settle it (its alarm is left to that start)
        clock.set(DUE - WINDOW // 2)
        residency = cells.residency
        await until(
            lambda: Priority.PRELOAD in residency._starts.values(), "a preload start under way"
        )
        clock.set(DUE)

        async def all_complete() -> bool:
            return (await _statuses(service)).get("complete", 0) == n

        await _eventually(service, all_complete, f"all {n} complete")
        await until(lambda: not cells.resident_count, "every run gave its slot back")
        assert await _after_steps(service) == n
        # every instance's alarm fired once: none was lost, and none was armed again while
        # its wake-up was queued or starting (the horizon scan at the deadline reads every
        # overdue row again, and a start's commits carry the deadline it is about to settle)
        assert cells.alarms.fired - fired == n
        for instance_id in (ids[0], ids[n // 2], ids[-1]):
            status = await call(service, WORKFLOW, "status", id=instance_id)
            assert status["status"] == "complete", (instance_id, status)


async def test_a_restart_mid_burst_loses_no_wake(tmp_path: Path) -> None:
    n = 400
    state = tmp_path / "state"
    clock = ManualClock(START)
    async with running_service(state, cells=CellSettings(residency_ms=WINDOW), clock=clock) as s:
        await _create_sleepers(s, n)
        clock.set(DUE)

        async def some_woke() -> bool:
            return await _after_steps(s) >= 1

        await _eventually(s, some_woke, "the burst began")
        # the service stops here, most of the burst still to run (or in flight)
        stopped_with = await _after_steps(s)
    assert stopped_with < n, "the burst ended before the restart: nothing was attacked"
    # the clock is past the deadline when the next process starts: every sleeper still
    # waiting is overdue, found by the start's full scan and woken
    clock = ManualClock(DUE + 5_000)
    async with running_service(state, cells=CellSettings(residency_ms=WINDOW), clock=clock) as s:

        async def all_complete() -> bool:
            return (await _statuses(s)).get("complete", 0) == n

        await _eventually(s, all_complete, f"all {n} complete after the restart")
        assert await _after_steps(s) == n
        outputs = await s.store._fetch(  # type: ignore[union-attr]
            "SELECT output FROM instances WHERE workflow = ?", (WORKFLOW,)
        )
        assert len(outputs) == n
        # each run went through its sleep: the replay after the restart found it recorded
        # (or the wake-up recorded it), never skipped it
        assert all(orjson.loads(row["output"])["results"][1] == {"slept": "nap"} for row in outputs)


async def test_a_store_fault_mid_burst_loses_no_wake(tmp_path: Path) -> None:
    """The store refuses commits while the burst's wake-ups are queued, starting and
    running: an alarm left to a start that then fails must not be lost (the start's
    failure arms the deadline again or reloads the instance once the store commits)."""
    n = 300
    clock = ManualClock(START)
    async with running_service(
        tmp_path / "state", cells=CellSettings(residency_ms=WINDOW), clock=clock
    ) as service:
        store: Any = service.store
        await _create_sleepers(service, n)
        clock.set(DUE)

        async def some_woke() -> bool:
            return await _after_steps(service) >= 1

        await _eventually(service, some_woke, "the burst began")
        store.fault = disk_full
        await until(lambda: store.health.failures >= 5, "commits refused", timeout=60)
        store.fault = None
        broke_with = await _after_steps(service)
        assert broke_with < n, "the burst ended before the fault: nothing was attacked"

        async def all_complete() -> bool:
            return (await _statuses(service)).get("complete", 0) == n

        await _eventually(service, all_complete, f"all {n} complete after the fault")
        assert await _after_steps(service) == n
