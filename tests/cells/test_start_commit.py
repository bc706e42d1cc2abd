"""A run's start (status `running`) commits together with what the run's first turn asks
to commit, so a new instance's first step costs no extra commit before its answer; and a
step's result, answered ahead of its commit, shares it with what run() does next (the
next step, the run's end)."""

from __future__ import annotations

from pathlib import Path

import orjson

from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, wait_for

BENCH_PROJECT = Path(__file__).resolve().parents[2] / "bench" / "project"


async def _commits_of_one(state: Path, steps: int) -> tuple[int, dict, list[str]]:
    """Commits of one `steps`-step instance from its create to its end (on a warm
    service), its final status and the types of its log entries."""
    async with running_service(state, BENCH_PROJECT) as service:
        assert service.store is not None
        store = service.store
        await call(service, "bench-workflow", "create", id="warm", params=params({"steps": 1}))
        await wait_for(service, "bench-workflow", ["warm"], {"complete"})
        before = store.commits  # type: ignore[attr-defined]
        await call(service, "bench-workflow", "create", id="one", params=params({"steps": steps}))
        done = await wait_for(service, "bench-workflow", ["one"], {"complete"})
        commits = store.commits - before  # type: ignore[attr-defined]
        rows = await store.log_after(InstanceRef("bench-workflow", "one"), 0, 1000)
    return commits, done["one"], [row.type for row in rows]


async def test_the_start_shares_the_first_steps_commit(tmp_path: Path) -> None:
    steps = 3
    commits, done, _ = await _commits_of_one(tmp_path / "state", steps)
    assert orjson.loads(done["output"])["steps"] == steps
    # the create, one commit per step (the first one carrying the start) and the end
    assert commits <= steps + 2, commits


async def test_a_run_of_steps_commits_two_steps_a_write_and_its_end_with_the_last(
    tmp_path: Path,
) -> None:
    steps = 10
    commits, done, logged = await _commits_of_one(tmp_path / "state", steps)
    assert orjson.loads(done["output"])["steps"] == steps
    # the create, the start with the first step, then two steps a write, the last of
    # them with the run's end (12 when every step and the end committed on their own)
    assert commits <= steps // 2 + 2, commits
    # every step is logged, in order, and the run's end after the last
    assert logged.count("step_completed") == steps
    assert logged[-1] == "workflow_completed"
