"""A step's result may reach JS before its commit lands, but nothing the workflow does
after it acts outside celld until then: the next step's `fetch` reaches the outside
only once the result before it is in the store. And because JS goes on meanwhile, what
it does next (the next step, the run's end) goes in the same write."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import orjson

from celld.store.base import InstanceRef
from tests.e2e.counter import counter_server
from tests.inprocess import call, params, running_service, until, wait_for

BENCH_PROJECT = Path(__file__).resolve().parents[2] / "bench" / "project"


def _done_steps(db: Path, instance: str) -> set[str]:
    """The step rows the store holds as finished right now (a reader of its own)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT name FROM steps WHERE instance_id = ? AND state = 'done'", (instance,)
        ).fetchall()
    finally:
        connection.close()
    return {name for (name,) in rows}


def _lock_for(db: Path, seconds: float) -> None:
    connection = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")

    def unlock() -> None:
        connection.execute("COMMIT")
        connection.close()

    threading.Timer(seconds, unlock).start()


async def test_nothing_acts_outside_before_the_result_before_it_is_durable(
    tmp_path: Path,
) -> None:
    seen: dict[str, set[str]] = {}
    async with running_service(tmp_path / "state") as service:
        assert service.store is not None
        db = Path(service.store.path)  # type: ignore[attr-defined]
        with counter_server() as counter:
            record = counter.record

            def recording(step: str, value: str) -> None:
                # what the store holds when the outside hears of this step's callback
                seen.setdefault(step, _done_steps(db, "one"))
                record(step, value)
                if step == "one/a#1":
                    # another writer holds the store for a second from now: a's result
                    # is answered to JS meanwhile, but cannot be committed until then
                    _lock_for(db, 1.0)

            counter.record = recording  # type: ignore[method-assign]
            await call(
                service, "harness-workflow", "create", id="one",
                params=params({"upstream": counter.url}),
            )  # fmt: skip
            # a, b (a retry a second later), a two-second sleep, then c1 and c2 at once
            await until(lambda: "one/c1#1" in seen and "one/c2#1" in seen, "c1 and c2 ran")
    # b's callback ran after a's result was answered: a was durable before b's fetch left
    assert "a" in seen["one/b#1"], seen
    assert {"a", "b"} <= seen["one/c1#1"], seen


async def test_a_run_of_steps_commits_about_twice_a_step_and_its_end_with_the_last(
    tmp_path: Path,
) -> None:
    steps = 10
    async with running_service(tmp_path / "state", BENCH_PROJECT) as service:
        assert service.store is not None
        store = service.store
        await call(service, "bench-workflow", "create", id="warm", params=params({"steps": 1}))
        await wait_for(service, "bench-workflow", ["warm"], {"complete"})
        before = store.commits  # type: ignore[attr-defined]
        await call(service, "bench-workflow", "create", id="one", params=params({"steps": steps}))
        done = await wait_for(service, "bench-workflow", ["one"], {"complete"})
        commits = store.commits - before  # type: ignore[attr-defined]
        rows = await store.log_after(InstanceRef("bench-workflow", "one"), 0, 1000)
        logged = [row.type for row in rows]
    assert orjson.loads(done["one"]["output"])["steps"] == steps
    # the create, the start with the first step, then two steps a write, the last with
    # the run's end (one a step before: steps + 2)
    assert commits <= steps // 2 + 2, commits
    # every step is logged, in order, and the run's end after the last
    assert logged.count("step_completed") == steps
    assert logged[-1] == "workflow_completed"
