"""A run's start (status `running`) commits together with what the run's first turn asks
to commit, so a new instance's first step costs no extra commit before its answer."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.inprocess import call, params, running_service, wait_for

BENCH_PROJECT = Path(__file__).resolve().parents[2] / "bench" / "project"


async def test_the_start_shares_the_first_steps_commit(tmp_path: Path) -> None:
    steps = 3
    async with running_service(tmp_path / "state", BENCH_PROJECT) as service:
        assert service.store is not None
        store = service.store
        await call(service, "bench-workflow", "create", id="warm", params=params({"steps": 1}))
        await wait_for(service, "bench-workflow", ["warm"], {"complete"})
        before = store.commits  # type: ignore[attr-defined]
        await call(service, "bench-workflow", "create", id="one", params=params({"steps": steps}))
        done = await wait_for(service, "bench-workflow", ["one"], {"complete"})
        commits = store.commits - before  # type: ignore[attr-defined]
    output = done["one"]["output"]
    assert orjson.loads(output)["steps"] == steps
    # the create, one commit per step (the first one carrying the start) and the end
    assert commits <= steps + 2, commits
