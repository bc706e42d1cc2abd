"""A resident sleep's wake-up has no commit of its own: JS is answered at once and the
sleep's `done` row goes to the store with the next step's result (and, since that
result is answered ahead of its commit, with the run's end). Nothing is acknowledged by
a wake-up: a crash before that commit leaves the row sleeping with its deadline past,
and the replay resolves it the same way."""

from __future__ import annotations

from pathlib import Path

import orjson

from celld.cells.clock import ManualClock
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, until, wait_for

BENCH_PROJECT = Path(__file__).resolve().parents[2] / "bench" / "project"
NAP_MS = 60_000  # inside the residency window: the sleeper stays resident


async def test_a_wake_up_commits_with_the_step_after_it(tmp_path: Path) -> None:
    ref = InstanceRef("sleeper-workflow", "napper")
    clock = ManualClock(1_700_000_000_000)
    async with running_service(tmp_path / "state", BENCH_PROJECT, clock=clock) as service:
        cells, store = service.cells, service.store
        assert cells is not None and store is not None
        await call(service, ref.workflow, "create", id=ref.id, params=params({"sleep_ms": NAP_MS}))

        def settled() -> bool:
            cell = cells.loaded(ref)
            return cell is not None and cell.parked and not cell._committing

        await until(settled, "the sleeper parked, resident, its commits landed")
        before = store.commits  # type: ignore[attr-defined]
        clock.advance(NAP_MS)
        done = await wait_for(service, ref.workflow, [ref.id], {"complete"})
        commits = store.commits - before  # type: ignore[attr-defined]
        logged = [row.type for row in await store.log_after(ref, 0, 1000)]
    assert orjson.loads(done[ref.id]["output"])["sleep_ms"] == NAP_MS
    # one write: the sleep's end, the step after it and the run's end
    assert commits <= 1, commits
    # still logged in order: the sleep's end, the step after it, the run's end
    nap = logged.index("sleep_completed")
    assert logged[nap:].index("step_completed") < logged[nap:].index("workflow_completed")
