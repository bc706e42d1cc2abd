"""Rollback handlers: `step.do(name, [config], cb, {rollback, rollbackConfig})`.

Each handler logs its call to KV (`rb:<instanceId>`), so both targets are observed the same
way: which handlers ran, in which order, and what they were given.
"""

from __future__ import annotations

import json
from typing import Any

from compat.differences import ROLLBACK_STATUS, difference
from compat.scenario import Scenario


def rollback_log(sc: Scenario, instance_id: str) -> list[dict[str, Any]]:
    text = sc.one({"b": "KV", "m": "get", "args": [f"rb:{instance_id}"]})
    return [] if text is None else list(json.loads(text))


@difference(wrangler=ROLLBACK_STATUS)
def test_failure_rolls_back_in_reverse_start_order(sc: Scenario) -> None:
    """The failed step's handler runs first (output undefined), then the earlier ones; each
    gets the step's ctx, its output, the error that failed the instance, and stepName."""
    i = sc.create(
        [
            {"do": "a", "value": "A", "rollback": True},
            {"do": "b", "value": "B", "rollback": True},
            {"do": "c", "always": True, "error": "nonretryable", "rollback": True},
        ]
    )
    done = sc.finished(i)
    assert done["status"] == "errored"
    log = rollback_log(sc, i)
    assert [entry["step"] for entry in log] == ["c", "b", "a"]
    assert [entry["output"] for entry in log] == [{"type": "undefined"}, "B", "A"]
    assert log[1]["ctx"] == {"step": {"name": "b", "count": 1}, "attempt": 1}
    assert log[1]["stepName"] == "b-1"
    assert log[1]["error"] == "Error: NonRetryableError: c failed on attempt 1"
    rollback = done.get("rollback")
    assert rollback == sc.pick(celld={"outcome": "complete", "error": None}, wrangler=None)


def test_no_rollback_when_the_error_is_caught(sc: Scenario) -> None:
    """A step error caught in run() does not roll anything back; the instance completes."""
    i = sc.create(
        [
            {"do": "a", "rollback": True},
            {"do": "b", "always": True, "error": "nonretryable", "catch": True},
        ]
    )
    assert sc.finished(i)["status"] == "complete"
    assert rollback_log(sc, i) == []


def test_steps_without_a_handler_are_skipped(sc: Scenario) -> None:
    """Only steps that registered a handler roll back."""
    i = sc.create(
        [
            {"do": "a", "rollback": True},
            {"do": "b"},
            {"throw": "run failed"},
        ]
    )
    assert sc.finished(i)["status"] == "errored"
    assert [entry["step"] for entry in rollback_log(sc, i)] == ["a"]


@difference(wrangler=ROLLBACK_STATUS)
def test_failing_handler_stops_the_rollback(sc: Scenario) -> None:
    """A handler that fails for good ends the rollback: earlier handlers do not run."""
    i = sc.create(
        [
            {"do": "a", "rollback": True},
            {"do": "b", "rollback": True, "rollbackThrows": True},
            {"throw": "run failed"},
        ]
    )
    done = sc.finished(i)
    assert done["status"] == "errored"
    assert done["error"] == {"name": "Error", "message": "run failed"}
    assert [entry["step"] for entry in rollback_log(sc, i)] == ["b"]
    assert done.get("rollback") == sc.pick(
        celld={
            "outcome": "failed",
            "error": {"name": "NonRetryableError", "message": "undo b refused"},
        },
        wrangler=None,
    )


@difference(wrangler=ROLLBACK_STATUS)
def test_terminate_with_rollback(sc: Scenario) -> None:
    """terminate({rollback: true}) runs the handlers of the steps that started, then the
    instance is terminated; the handlers see `Error: Instance terminated during rollback`."""
    i = sc.create([{"do": "a", "value": "A", "rollback": True}, {"wait": "w", "type": "go"}])
    sc.until(i, sc.running_status())
    sc.terminate(i, rollback=True)
    done = sc.finished(i)
    assert done["status"] == "terminated"
    log = rollback_log(sc, i)
    assert [(e["step"], e["output"]) for e in log] == [("a", "A")]
    assert log[0]["error"] == "Error: Instance terminated during rollback"
    assert done.get("rollback") == sc.pick(
        celld={"outcome": "complete", "error": None}, wrangler=None
    )


def test_terminate_without_rollback_runs_no_handler(sc: Scenario) -> None:
    i = sc.create([{"do": "a", "rollback": True}, {"sleep": "nap", "duration": "1 hour"}])
    sc.wait(300)
    sc.terminate(i)
    assert sc.finished(i)["status"] == "terminated"
    assert rollback_log(sc, i) == []


def test_bad_rollback_options_are_refused(sc: Scenario) -> None:
    """A rollback that is not a function, or a bad rollbackConfig, is thrown into run()."""
    i = sc.create(
        [
            {"do": "a", "rollback": True, "rollbackConfig": {"retries": {"limit": -1, "delay": 0}},
             "catch": True},
        ]
    )  # fmt: skip
    caught = sc.output(i)["results"][0]["caught"]
    assert caught["message"].startswith(
        'WorkflowFatalError: Rollback config for "a" is in a invalid'
    )
