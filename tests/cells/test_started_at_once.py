"""Steps JS starts at once (their config's first answer is known in the isolate) behave as
steps the engine started: the callback runs after step.do() returns, gets a fresh context,
failures are retried, values are recorded as structured clones (js/workflows/step.js)."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.inprocess import call, running_service, wait_for

WORKFLOW = "started-at-once-workflow"
DEFAULT_CONFIG = {
    "retries": {"limit": 5, "delay": 10000, "backoff": "exponential"},
    "timeout": "10 minutes",
}


def context(name: str, count: int, config: dict) -> dict:
    return {"step": {"name": name, "count": count}, "attempt": 1, "config": config}


async def test_steps_started_at_once_keep_the_semantics_of_steps(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state", js_threads=1) as service:
        # twice: the second instance runs in the warm isolate of the first, where even its
        # first calls of each config start at once
        for instance_id in ("a", "b"):
            await call(service, WORKFLOW, "create", id=instance_id)
            done = await wait_for(service, WORKFLOW, [instance_id], {"complete", "errored"}, 60)
            status = done[instance_id]
            assert status["status"] == "complete", status
            output = orjson.loads(status["output"])
            assert output["bridgeTextHidden"] is True  # user code cannot send raw text
            assert output["ranInsideCall"] is False
            assert output["first"] == context("ctx", 1, DEFAULT_CONFIG)
            assert output["second"] == context("ctx", 2, DEFAULT_CONFIG)
            assert output["attempts"] == [1, 2]
            assert output["syncThrow"] == 2
            assert output["thenable"] == "from then"
            assert output["plain"] == 7
            assert output["structured"] == {"when": 5, "same": True, "negativeZero": True}
            assert output["exhausted"] == "RangeError: attempt 3"
