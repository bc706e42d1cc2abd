"""instance.subscribe(): the instance's lifecycle and step events (spec 2; docs "Subscribe to
events"), history first, then live, ending after the final event."""

from __future__ import annotations

import threading
from typing import Any

from compat.scenario import Scenario

STEP_AND_END = "step_started,attempt_started,attempt_completed,step_completed,workflow_completed"


def subscribed(sc: Scenario, instance_id: str, **query: Any) -> dict[str, Any]:
    result: dict[str, Any] = sc.ok("/subscribe", id=instance_id, **query)
    assert result["ordered"] and result["fieldsOk"], result
    return result


def test_history_of_a_finished_instance(sc: Scenario) -> None:
    """Subscribing after the end replays the retained events, then ends (and stays ended)."""
    i = sc.create([{"do": "a", "value": {"n": 1}}, {"do": "b", "value": 2}])
    sc.output(i)
    got = subscribed(sc, i, filter=STEP_AND_END)
    assert got["ended"] and got["doneAfterEnd"]
    assert got["events"] == [
        {"type": "step_started", "stepName": "a-1", "config": got["events"][0]["config"]},
        {"type": "attempt_started", "stepName": "a-1", "attempt": 1},
        {"type": "attempt_completed", "stepName": "a-1", "attempt": 1},
        {"type": "step_completed", "stepName": "a-1", "output": {"n": 1}},
        {"type": "step_started", "stepName": "b-1", "config": got["events"][4]["config"]},
        {"type": "attempt_started", "stepName": "b-1", "attempt": 1},
        {"type": "attempt_completed", "stepName": "b-1", "attempt": 1},
        {"type": "step_completed", "stepName": "b-1", "output": 2},
        {"type": "workflow_completed", "output": {"results": [{"n": 1}, 2]}},
    ]
    assert got["events"][0]["config"]["retries"]["limit"] == 5


def test_lifecycle_events_of_a_run(sc: Scenario) -> None:
    """Unfiltered, a run starts with queued and started (with its params) and ends with
    completed; the step events sit between them."""
    i = sc.create([{"do": "only", "value": "v"}])
    sc.output(i)
    types = [e["type"] for e in subscribed(sc, i)["events"]]
    assert types[0] == "workflow_queued"
    assert "workflow_started" in types and "workflow_running" in types
    assert types[-1] == "workflow_completed"
    first = types.index("step_started")
    assert types.index("workflow_started") < first < types.index("step_completed")
    started = next(e for e in subscribed(sc, i)["events"] if e["type"] == "workflow_started")
    assert started["params"]["ops"] == [{"do": "only", "value": "v"}]


def test_retries_sleep_and_errors(sc: Scenario) -> None:
    """A failed attempt carries its error and the delay before the next one; a sleep its
    duration; a step that fails for good ends in step_errored, then workflow_errored."""
    config = {"retries": {"limit": 1, "delay": 200, "backoff": "constant"}}
    i = sc.create(
        [{"sleep": "nap", "duration": 300}, {"do": "f", "always": True, "config": config}]
    )
    sc.wait(400)
    sc.wait(400)
    sc.failure(i)
    wanted = (
        "sleep_started,sleep_completed,attempt_started,attempt_errored,step_errored,"
        "workflow_errored"
    )
    events = subscribed(sc, i, filter=wanted)["events"]
    assert events[:2] == [
        {"type": "sleep_started", "stepName": "nap-1", "durationMs": 300},
        {"type": "sleep_completed", "stepName": "nap-1"},
    ]
    error = {"name": "Error", "message": "f failed on attempt 1"}
    assert events[2:5] == [
        {"type": "attempt_started", "stepName": "f-1", "attempt": 1},
        {"type": "attempt_errored", "stepName": "f-1", "attempt": 1, "error": error,
         "retryDelayMs": 200},
        {"type": "attempt_started", "stepName": "f-1", "attempt": 2},
    ]  # fmt: skip
    assert events[5]["type"] == "attempt_errored" and events[5]["attempt"] == 2
    assert events[6:] == [
        {"type": "step_errored", "stepName": "f-1"},
        {"type": "workflow_errored",
         "error": {"name": "Error", "message": "f failed on attempt 2"}},
    ]  # fmt: skip


def test_live_events_as_they_happen(sc: Scenario) -> None:
    """A subscriber waiting on a running instance gets the wait's events as the event
    arrives, then the end: it listens for as long as the instance runs."""
    i = sc.create([{"wait": "approval", "type": "go", "timeout": "1 hour"}, {"do": "after"}])
    sc.settle()
    out: dict[str, Any] = {}
    filter_ = "wait_started,wait_completed,step_completed,workflow_completed"
    reader = threading.Thread(target=lambda: out.update(subscribed(sc, i, filter=filter_)))
    reader.start()
    reader.join(1.0)
    assert reader.is_alive()  # nothing final yet: still listening
    sc.event(i, "go", {"ok": True})
    reader.join(30)
    assert not reader.is_alive()
    assert [e["type"] for e in out["events"]] == [
        "wait_started", "wait_completed", "step_completed", "workflow_completed",
    ]  # fmt: skip
    assert out["events"][0]["eventType"] == "go"


def test_cursor_resumes_after_an_event(sc: Scenario) -> None:
    """`cursor` is the last eventId processed: the next read starts after it."""
    i = sc.create([{"do": "a"}, {"do": "b"}])
    sc.output(i)
    first = subscribed(sc, i, filter="step_completed", max=1)
    assert first["events"] == [
        {"type": "step_completed", "stepName": "a-1", "output": {"step": "a", "attempt": 1}}
    ]
    rest = subscribed(sc, i, filter="step_completed", cursor=first["lastEventId"])
    assert [e["stepName"] for e in rest["events"]] == ["b-1"]
    assert rest["ended"]


def test_filter_that_excludes_the_end_still_ends(sc: Scenario) -> None:
    i = sc.create([{"do": "a"}])
    sc.output(i)
    got = subscribed(sc, i, filter="wait_started")
    assert got == {**got, "events": [], "ended": True}


def test_invalid_options_throw(sc: Scenario) -> None:
    i = sc.create([{"do": "a"}])
    sc.output(i)
    for options in ('{"filter": ["nope"]}', '{"cursor": -1}', '{"other": 1}'):
        assert sc.error("/subscribe", id=i, options=options) == {
            "name": "Error",
            "message": "Invalid Workflow subscription options",
        }


def test_rollback_events(sc: Scenario) -> None:
    """A rollback is logged between the failed step and the end: started, each handler
    (newest step first) with its attempt, then completed, then the instance errors."""
    i = sc.create(
        [
            {"do": "a", "value": "A", "rollback": True},
            {"do": "b", "always": True, "error": "nonretryable", "rollback": True},
        ]
    )
    sc.finished(i)
    wanted = (
        "step_errored,rollback_started,rollback_step_started,rollback_attempt_started,"
        "rollback_attempt_completed,rollback_step_completed,rollback_completed,"
        "rollback_errored,workflow_errored"
    )
    events = subscribed(sc, i, filter=wanted)["events"]
    assert [(e["type"], e.get("stepName")) for e in events] == [
        ("step_errored", "b-1"),
        ("rollback_started", None),
        ("rollback_step_started", "b-1"),
        ("rollback_attempt_started", "b-1"),
        ("rollback_attempt_completed", "b-1"),
        ("rollback_step_completed", "b-1"),
        ("rollback_step_started", "a-1"),
        ("rollback_attempt_started", "a-1"),
        ("rollback_attempt_completed", "a-1"),
        ("rollback_step_completed", "a-1"),
        ("rollback_completed", None),
        ("workflow_errored", None),
    ]
