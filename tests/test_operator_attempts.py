"""Each attempt's times and error, read back from an instance's event log
(celld.server.attempts) and reconciled with the step row."""

from __future__ import annotations

import json
from typing import Any

from celld.server.attempts import attempts_of, read_log
from celld.server.values import iso
from celld.store.base import LogRow


def log(*entries: tuple[int, str, dict[str, Any]]) -> list[LogRow]:
    return [LogRow(n, t, kind, json.dumps(body)) for n, (t, kind, body) in enumerate(entries, 1)]


ERROR = {"name": "Error", "message": "declined"}


def test_a_retried_step_has_each_attempt_with_its_error() -> None:
    rows = log(
        (100, "step_started", {"stepName": "charge-1", "config": None}),
        (100, "attempt_started", {"stepName": "charge-1", "attempt": 1}),
        (130, "attempt_errored", {"stepName": "charge-1", "attempt": 1, "error": ERROR}),
        (1130, "attempt_started", {"stepName": "charge-1", "attempt": 2}),
        (1140, "attempt_completed", {"stepName": "charge-1", "attempt": 2}),
    )
    row = {"state": "done", "failed_attempts": 1, "started_at": 95, "finished_at": 1138}
    attempts = attempts_of(row, read_log(rows)["charge-1"])
    assert attempts == [
        {"attempt": 1, "start": iso(95), "end": iso(130), "success": False, "error": ERROR},
        {"attempt": 2, "start": iso(1130), "end": iso(1138), "success": True, "error": None},
    ]


def test_a_restart_begins_the_history_anew() -> None:
    rows = log(
        (1, "step_started", {"stepName": "a-1"}),
        (1, "attempt_started", {"stepName": "a-1", "attempt": 1}),
        (2, "attempt_errored", {"stepName": "a-1", "attempt": 1, "error": ERROR}),
        (9, "step_started", {"stepName": "a-1"}),
        (9, "attempt_started", {"stepName": "a-1", "attempt": 1}),
    )
    assert len(read_log(rows)["a-1"]) == 1


def test_what_the_log_does_not_have_yet_comes_from_the_row() -> None:
    # the row has failed twice and retries; the second failure's commit is under way
    rows = log(
        (10, "step_started", {"stepName": "s-1"}),
        (10, "attempt_started", {"stepName": "s-1", "attempt": 1}),
        (20, "attempt_errored", {"stepName": "s-1", "attempt": 1, "error": ERROR}),
    )
    later = {"name": "Error", "message": "again"}
    row = {"state": "retrying", "failed_attempts": 2, "started_at": 10, "error": later}
    attempts = attempts_of(row, read_log(rows)["s-1"])
    assert [a["success"] for a in attempts] == [False, False]
    assert attempts[0]["error"] == ERROR and attempts[1]["error"] == later
    # a running attempt has no end, whatever the log said
    running = attempts_of({"state": "running", "failed_attempts": 0, "started_at": 5}, [])
    assert running == [{"attempt": 1, "start": iso(5), "end": None, "success": None, "error": None}]
