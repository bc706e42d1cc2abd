"""The output gate, attacked through a whole celld: a recorder outside takes every value a
workflow sends out and, the moment it arrives, reads which step results the store holds.
Every value sent must already be durable (a result that was not could be lost in a crash
and drawn again, and the outside world would hold a value the journal contradicts).

Commits are made slow the way a slow disk makes them: the store's writer thread waits
before each commit (`SqliteStore.fault`, its fault hook). The recorder test that kills
celld for real is tests/e2e/test_effects_after_commits.py; the gate's own rules are
tests/isolate/test_gate.py.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.e2e.counter import QuietHandler, serving
from tests.inprocess import call, params, running_service, wait_for

GATE = Path(__file__).resolve().parents[1] / "projects" / "gate"
SLOW_COMMIT_S = 0.03


def _durable_results(db: Path) -> dict[tuple[str, str], Any]:
    """(instance, step) -> result, for every step the store holds as done right now."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = connection.execute(
            "SELECT instance_id, name, value FROM steps WHERE state = 'done' AND type = 'do'"
        ).fetchall()
    finally:
        connection.close()
    return {(instance, name): json.loads(value) for instance, name, value in rows}


class Recorder:
    """What arrived, each with the store's durable results at the moment it arrived."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.arrivals: list[tuple[dict[str, Any], dict[tuple[str, str], Any]]] = []
        self.lock = threading.Lock()
        self.url = ""

    def arrived(self, body: dict[str, Any]) -> None:
        durable = _durable_results(self.db)
        with self.lock:
            self.arrivals.append((body, durable))


@contextmanager
def recording(db: Path) -> Iterator[Recorder]:
    recorder = Recorder(db)

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("content-length") or 0)
            recorder.arrived(json.loads(self.rfile.read(length)))
            self.answer_ok()

    with serving(Handler) as url:
        recorder.url = url
        yield recorder


def _slow_disk() -> None:
    time.sleep(SLOW_COMMIT_S)


async def test_a_log_line_between_steps_lets_no_result_out_early(tmp_path: Path) -> None:
    """Step b starts at once after a's early answer and finishes in the same turn; the
    log line before it once made b's result leave before its commit."""
    async with running_service(tmp_path / "state", GATE) as service:
        assert service.store is not None
        db = Path(service.store.path)  # type: ignore[attr-defined]
        with recording(db) as recorder:
            service.store.fault = _slow_disk  # type: ignore[attr-defined]
            ids = [f"log-{n}" for n in range(12)]
            for instance_id in ids:
                await call(service, "between-log", "create", id=instance_id,
                           params=params({"upstream": recorder.url, "log": True}))  # fmt: skip
            final = await wait_for(service, "between-log", ids, {"complete", "errored"})
    assert {s["status"] for s in final.values()} == {"complete"}, final
    assert len(recorder.arrivals) == len(ids)
    leaks = [
        (body["id"], name)
        for body, durable in recorder.arrivals
        for name, value in body["steps"].items()
        if durable.get((body["id"], name)) != value
    ]
    assert leaks == [], f"results sent out before they were durable: {leaks}"


async def test_module_state_of_an_earlier_run_waits_for_its_commit(tmp_path: Path) -> None:
    """A run's isolate goes to the next run before the run's last commit lands: what the
    next run read from module state must not leave before that commit."""
    async with running_service(tmp_path / "state", GATE, js_threads=1) as service:
        assert service.store is not None
        db = Path(service.store.path)  # type: ignore[attr-defined]
        with recording(db) as recorder:
            service.store.fault = _slow_disk  # type: ignore[attr-defined]
            ids = [f"secret-{n}" for n in range(20)]
            for instance_id in ids:
                await call(service, "secret-keeper", "create", id=instance_id,
                           params=params({"upstream": recorder.url}))  # fmt: skip
            final = await wait_for(service, "secret-keeper", ids, {"complete", "errored"})
    assert {s["status"] for s in final.values()} == {"complete"}, final
    assert recorder.arrivals, "no run read an earlier run's secret (the isolate was not reused)"
    leaks = [
        body["seen"]["id"]
        for body, durable in recorder.arrivals
        if durable.get((body["seen"]["id"], "secret")) != body["seen"]["secret"]
    ]
    assert leaks == [], f"secrets sent out before they were durable: {leaks}"
