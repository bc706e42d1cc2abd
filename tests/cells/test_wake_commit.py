"""A resident sleep's wake-up has no commit of its own: JS is answered at once and the
sleep's `done` row goes to the store with the next step's result. Nothing is
acknowledged by a wake-up: a crash before that commit leaves the row sleeping with its
deadline past, and the replay resolves it the same way."""

from __future__ import annotations

from pathlib import Path

import orjson

from celld.cells.clock import ManualClock
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, until, wait_for

START = 1_700_000_000_000
MINUTE = 60_000
SLEEPER = {
    "ops": [
        {"do": "a", "value": 1},
        {"sleep": "nap", "duration": "1 minute"},
        {"do": "b", "value": 2},
    ]
}


async def test_a_wake_up_commits_with_the_step_after_it(tmp_path: Path) -> None:
    clock = ManualClock(START)
    async with running_service(tmp_path / "state", clock=clock) as service:
        cells, store = service.cells, service.store
        assert cells is not None and store is not None
        ref = InstanceRef("script-workflow", "sleeper")
        await call(service, ref.workflow, "create", id=ref.id, params=params(SLEEPER))

        def parked() -> bool:
            cell = cells.loaded(ref)
            return cell is not None and cell.run is not None and cell.parked

        # a minute is inside the residency window: the sleeper stays resident, parked
        await until(parked, "the sleeper parked, resident")
        await until(lambda: cells.loaded(ref)._committing == 0, "its commits landed")  # type: ignore[union-attr]
        before = store.commits  # type: ignore[attr-defined]
        clock.advance(MINUTE)
        done = await wait_for(service, ref.workflow, [ref.id], {"complete"})
        commits = store.commits - before  # type: ignore[attr-defined]
        logged = [row.type for row in await store.log_after(ref, 0, 1000)]
    assert orjson.loads(done[ref.id]["output"]) is not None
    # the step after the sleep (carrying the sleep's end) and the run's end: no commit
    # for the wake-up itself
    assert commits <= 2, commits
    # the sleep's end is still logged, in order, before the step after it
    assert logged.index("sleep_completed") < logged.index("workflow_completed")
    nap = logged.index("sleep_completed")
    assert "step_started" in logged[nap:], logged
