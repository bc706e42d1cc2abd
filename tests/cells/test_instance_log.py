"""The event log subscribe() streams (celld/cells/instance_log.py), derived from a real
machine's commits: every change logged once, in order, whatever the commits group."""

from __future__ import annotations

import json

from celld.cells.instance_log import InstanceLog
from celld.engine import ErrorInfo, Machine, Status
from celld.store.logpack import expand_entries

T0 = 1_700_000_000_000
RETRY = {"retries": {"limit": 2, "delay": 500, "backoff": "constant"}}


def logged(log: InstanceLog, machine: Machine, now: int) -> list[dict]:
    out = []
    for _, kind, body in expand_entries(log.entries(machine.take_changes(), now)):
        out.append({"type": kind, **json.loads(body)})
    return out


def test_each_commit_logs_what_it_changed() -> None:
    m = Machine.create("wf", "i", '{"a":1}', T0)
    log = InstanceLog(m)
    assert logged(log, m, T0) == [{"type": "workflow_queued"}]
    m.start_run(T0)
    m.step_do("s", 1, None, RETRY, T0)
    assert logged(log, m, T0) == [
        {"type": "workflow_started", "$params": '{"a":1}'},
        {"type": "workflow_running"},
        {"type": "step_started", "stepName": "s-1",
         "config": {"retries": {"limit": 2, "delay": 500, "backoff": "constant"},
                    "timeout": "10 minutes"}},
        {"type": "attempt_started", "stepName": "s-1", "attempt": 1},
    ]  # fmt: skip
    m.attempt_failed(("do", "s", 1), 1, ErrorInfo("Error", "boom"), T0 + 10)  # type: ignore[arg-type]
    m.idle(T0 + 10)
    assert logged(log, m, T0 + 10) == [
        {"type": "workflow_waiting"},
        {"type": "attempt_errored", "stepName": "s-1", "attempt": 1,
         "error": {"name": "Error", "message": "boom"}, "retryDelayMs": 500},
    ]  # fmt: skip
    # the retry starts and succeeds between two commits: both are logged at once, and
    # the run still went through `running` on its way from waiting to complete
    m.wake(T0 + 510)
    m.attempt_succeeded(("do", "s", 1), 2, '"ok"', T0 + 520)  # type: ignore[arg-type]
    m.run_succeeded('"done"', T0 + 530)
    assert logged(log, m, T0 + 530) == [
        {"type": "workflow_running"},
        {"type": "attempt_started", "stepName": "s-1", "attempt": 2},
        {"type": "attempt_completed", "stepName": "s-1", "attempt": 2},
        {"type": "step_completed", "stepName": "s-1", "$output": '"ok"'},
        {"type": "workflow_completed", "$output": '"done"'},
    ]
    assert logged(log, m, T0 + 600) == []  # nothing changed: nothing logged


def test_sensitive_output_is_never_logged_and_a_failed_step_ends_the_run() -> None:
    m = Machine.create("wf", "i", "{}", T0)
    m.start_run(T0)
    log = InstanceLog(m)
    m.take_changes()
    m.step_do("secret", 1, None, {"sensitive": "output"}, T0)
    m.attempt_succeeded(("do", "secret", 1), 1, '"hunter2"', T0)  # type: ignore[arg-type]
    m.step_do("f", 1, None, {"retries": {"limit": 0, "delay": 0}}, T0)
    m.attempt_failed(("do", "f", 1), 1, ErrorInfo("TypeError", "bad"), T0)  # type: ignore[arg-type]
    m.run_failed(ErrorInfo("TypeError", "bad"), T0)
    events = logged(log, m, T0)
    assert "hunter2" not in json.dumps(events)
    assert {"type": "step_completed", "stepName": "secret-1", "$output": '"[REDACTED]"'} in events
    assert [e["type"] for e in events][-3:] == [
        "attempt_errored",
        "step_errored",
        "workflow_errored",
    ]
    assert events[-1]["error"] == {"name": "TypeError", "message": "bad"}


def test_sleep_and_wait_events() -> None:
    m = Machine.create("wf", "i", "{}", T0)
    m.start_run(T0)
    log = InstanceLog(m)
    m.take_changes()
    m.step_sleep("nap", 1, T0, duration_ms=1000)
    m.step_wait("w", 1, "go", 60_000, T0)
    assert logged(log, m, T0) == [
        {"type": "sleep_started", "stepName": "nap-1", "durationMs": 1000},
        {"type": "wait_started", "stepName": "w-1", "eventType": "go"},
    ]
    m.wake(T0 + 1000)
    m.send_event("go", "1", T0 + 1001)
    assert [e["type"] for e in logged(log, m, T0 + 1001)] == ["sleep_completed", "wait_completed"]


def test_a_rollback_is_logged_newest_handler_first_with_its_retries() -> None:
    m = Machine.create("wf", "i", "{}", T0)
    m.start_run(T0)
    log = InstanceLog(m)
    m.take_changes()
    no_retry = {"config": {"retries": {"limit": 1, "delay": 100, "backoff": "constant"}},
                "dynamic": False}  # fmt: skip
    for name in ("flight", "hotel"):
        m.step_do(name, 1, None, None, T0, rollback=no_retry)
        m.attempt_succeeded(("do", name, 1), 1, '"ok"', T0)  # type: ignore[arg-type]
    assert [e["type"] for e in logged(log, m, T0)].count("step_completed") == 2  # no rollback_*
    m.step_do("car", 1, None, {"retries": {"limit": 0, "delay": 0}}, T0)
    m.attempt_failed(("do", "car", 1), 1, ErrorInfo("Error", "no car"), T0)  # type: ignore[arg-type]
    m.run_failed(ErrorInfo("Error", "no car"), T0)
    events = logged(log, m, T0)
    assert events[-1] == {"type": "rollback_started"}
    assert m.status is Status.RUNNING
    # the hotel's handler fails once (retried), then succeeds; the flight's succeeds
    m.rollback_next(T0)
    key, attempt = m.rollback_in_flight()
    assert key.name == "hotel"
    m.rollback_attempt_failed(key, attempt, ErrorInfo("Error", "busy"), T0)
    assert logged(log, m, T0) == [
        {"type": "rollback_step_started", "stepName": "hotel-1",
         "config": {"retries": {"limit": 1, "delay": 100, "backoff": "constant"},
                    "timeout": "10 minutes"}},
        {"type": "rollback_attempt_started", "stepName": "hotel-1", "attempt": 1},
        {"type": "rollback_attempt_errored", "stepName": "hotel-1", "attempt": 1,
         "error": {"name": "Error", "message": "busy"}, "retryDelayMs": 100},
    ]  # fmt: skip
    m.rollback_next(T0 + 100)
    key, attempt = m.rollback_in_flight()
    m.rollback_attempt_succeeded(key, attempt, T0 + 100)
    m.rollback_next(T0 + 100)
    key, attempt = m.rollback_in_flight()
    assert key.name == "flight"
    m.rollback_attempt_succeeded(key, attempt, T0 + 100)
    assert m.rollback_next(T0 + 100) is None
    assert [(e["type"], e.get("stepName")) for e in logged(log, m, T0 + 100)] == [
        ("rollback_attempt_started", "hotel-1"),
        ("rollback_attempt_completed", "hotel-1"),
        ("rollback_step_completed", "hotel-1"),
        ("rollback_step_started", "flight-1"),
        ("rollback_attempt_started", "flight-1"),
        ("rollback_attempt_completed", "flight-1"),
        ("rollback_step_completed", "flight-1"),
        ("rollback_completed", None),
        ("workflow_errored", None),
    ]


def test_a_handler_that_fails_for_good_ends_the_rollback_as_errored() -> None:
    m = Machine.create("wf", "i", "{}", T0)
    m.start_run(T0)
    log = InstanceLog(m)
    m.step_do("a", 1, None, None, T0, rollback={"config": {"retries": {"limit": 0, "delay": 0}},
                                                 "dynamic": False})  # fmt: skip
    m.attempt_succeeded(("do", "a", 1), 1, "1", T0)  # type: ignore[arg-type]
    logged(log, m, T0)
    m.terminate(T0, rollback=True)
    assert logged(log, m, T0)[-1] == {"type": "rollback_started"}
    m.rollback_next(T0)
    key, attempt = m.rollback_in_flight()
    m.rollback_attempt_failed(key, attempt, ErrorInfo("Error", "cannot undo"), T0)
    assert [e["type"] for e in logged(log, m, T0)] == [
        "rollback_step_started", "rollback_attempt_started", "rollback_attempt_errored",
        "rollback_step_errored", "rollback_errored", "workflow_terminated",
    ]  # fmt: skip


def test_a_cell_loaded_mid_rollback_does_not_log_its_start_again() -> None:
    m = Machine.create("wf", "i", "{}", T0)
    m.start_run(T0)
    for name in ("a", "b"):
        m.step_do(name, 1, None, None, T0, rollback={"config": None, "dynamic": False})
        m.attempt_succeeded(("do", name, 1), 1, "1", T0)  # type: ignore[arg-type]
    m.run_failed(ErrorInfo("Error", "late"), T0)
    m.rollback_next(T0)
    m.rollback_attempt_succeeded(*m.rollback_in_flight(), T0)
    m.take_changes()
    log = InstanceLog(m)  # as a cell loaded from the store while the rollback runs
    m.rollback_next(T0)
    m.rollback_attempt_succeeded(*m.rollback_in_flight(), T0)
    m.rollback_next(T0)
    assert [(e["type"], e.get("stepName")) for e in logged(log, m, T0)] == [
        ("rollback_step_started", "a-1"),
        ("rollback_attempt_started", "a-1"),
        ("rollback_attempt_completed", "a-1"),
        ("rollback_step_completed", "a-1"),
        ("rollback_completed", None),
        ("workflow_errored", None),
    ]
