"""The event log subscribe() streams (celld/cells/instance_log.py), derived from a real
machine's commits: every change logged once, in order, whatever the commits group."""

from __future__ import annotations

import json

from celld.cells.instance_log import InstanceLog
from celld.engine import ErrorInfo, Machine

T0 = 1_700_000_000_000
RETRY = {"retries": {"limit": 2, "delay": 500, "backoff": "constant"}}


def logged(log: InstanceLog, machine: Machine, now: int) -> list[dict]:
    out = []
    for _, kind, body in log.entries(machine.take_changes(), now):
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
    # the retry starts and succeeds between two commits: both are logged at once
    m.wake(T0 + 510)
    m.attempt_succeeded(("do", "s", 1), 2, '"ok"', T0 + 520)  # type: ignore[arg-type]
    m.run_succeeded('"done"', T0 + 530)
    assert logged(log, m, T0 + 530) == [
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
