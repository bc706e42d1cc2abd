"""Rollback handlers end to end: a real `celld run` (manual clock) driven over HTTP, handlers
that report to an outside audit server, and a SIGKILL in the middle of a rollback."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from click.testing import CliRunner

from celld.cli.main import cli
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS
from tests.e2e.counter import serving

PROJECT = PROJECTS / "rollback"
WORKFLOW = "saga-test"
MINUTE = 60_000


class Audit:
    """Records each handler call; answers from a per-step script ("ok" when it runs out).
    "hold" keeps the call open (the handler hangs) until the server stops."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.script: dict[str, list[str]] = {}
        self.url = ""
        self.stopping = threading.Event()
        self._lock = threading.Lock()

    def steps(self) -> list[str]:
        with self._lock:
            return [step for step, _ in self.calls]

    def answer(self, step: str, body: dict[str, Any]) -> str:
        with self._lock:
            self.calls.append((step, body))
            queue = self.script.get(step) or []
            return queue.pop(0) if queue else "ok"


@contextmanager
def audit_server() -> Iterator[Audit]:
    audit = Audit()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            step = parse_qs(urlparse(self.path).query)["step"][0]
            length = int(self.headers.get("content-length") or 0)
            answer = audit.answer(step, json.loads(self.rfile.read(length) or b"{}"))
            if answer == "hold":
                audit.stopping.wait(60)
                answer = "ok"
            data = answer.encode()
            try:
                self.send_response(200)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the caller died (SIGKILL)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        audit.url = url
        try:
            yield audit
        finally:
            audit.stopping.set()


@pytest.fixture(scope="module")
def audit() -> Iterator[Audit]:
    with audit_server() as running:
        yield running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("rb") / "state", manual_clock=True)
    celld.start()
    yield celld
    celld.stop()


def create(server: CelldServer, instance_id: str, params: dict[str, Any]) -> None:
    response = server.post("/create", params={"id": instance_id}, json=params)
    assert response.status_code == 200, response.text


def status(server: CelldServer, instance_id: str) -> dict[str, Any]:
    response = server.get("/status", params={"id": instance_id})
    assert response.status_code == 200, response.text
    return dict(response.json())


def wait_status(server: CelldServer, instance_id: str, wanted: str) -> dict[str, Any]:
    return server.wait_for(lambda: (s := status(server, instance_id))["status"] == wanted and s)


def undo_calls(audit: Audit, prefix: str) -> list[str]:
    return [s for s in audit.steps() if s.startswith(f"undo-{prefix}")]


def test_failure_rolls_back_completed_and_failed_steps_newest_first(
    server: CelldServer, audit: Audit
) -> None:
    create(server, "fail-1", {"audit": audit.url, "steps": ["f1a", "f1b", "f1c"], "failAt": "f1c"})
    done = wait_status(server, "fail-1", "errored")
    assert done["error"] == {"name": "NonRetryableError", "message": "f1c broke"}
    assert done["rollback"] == {"outcome": "complete", "error": None}
    assert undo_calls(audit, "f1") == ["undo-f1c", "undo-f1b", "undo-f1a"]
    bodies = {step: body for step, body in audit.calls if step.startswith("undo-f1")}
    assert bodies["undo-f1c"]["output"] == "undefined"  # the failed step had no output
    assert bodies["undo-f1b"]["output"] == "f1b-ok"
    assert bodies["undo-f1b"]["error"] == "Error: NonRetryableError: f1c broke"
    assert bodies["undo-f1b"]["ctx"]["step"] == {"name": "f1b", "count": 1}
    assert bodies["undo-f1b"]["ctx"]["attempt"] == 1
    assert bodies["undo-f1b"]["ctx"]["config"]["retries"]["limit"] == 5
    assert bodies["undo-f1b"]["stepName"] == "f1b-1"
    view = server.describe(WORKFLOW, "fail-1")
    assert [s["name"] for s in view["steps"]] == ["f1a", "f1b", "f1c"]  # no rollback rows
    assert view["rollback"]["state"] == "complete"
    assert [(s["name"], s["state"]) for s in view["rollback"]["steps"]] == [
        ("f1c", "done"),
        ("f1b", "done"),
        ("f1a", "done"),
    ]


def test_handler_retries_on_its_own_delay_then_succeeds(server: CelldServer, audit: Audit) -> None:
    audit.script["undo-r1a"] = ["fail"]
    undo_config = {"retries": {"limit": 2, "delay": "1 minute", "backoff": "constant"}}
    params = {"audit": audit.url, "steps": ["r1a", "r1b"], "failAt": "r1b"}
    create(server, "retry-1", {**params, "undoConfig": undo_config})
    failed_at = server.clock_now()  # (the clock stands still until advanced)

    def handler_row() -> dict[str, Any]:
        return dict(((server.describe(WORKFLOW, "retry-1").get("rollback") or {}).get("steps")
                     or [{}])[-1])  # fmt: skip

    server.wait_for(lambda: handler_row().get("state") == "retrying")
    assert status(server, "retry-1") == {"status": "running"}
    # The retry waits for its own delay: it is due a minute after the failure, so a clock
    # moved a millisecond short of that leaves it waiting.
    assert handler_row()["retry_at"] == failed_at + MINUTE
    assert server.advance(MINUTE - 1) < handler_row()["retry_at"]
    assert undo_calls(audit, "r1a") == ["undo-r1a"]
    server.advance(1)
    done = wait_status(server, "retry-1", "errored")
    assert done["rollback"] == {"outcome": "complete", "error": None}
    assert undo_calls(audit, "r1a") == ["undo-r1a", "undo-r1a"]


def test_handler_that_fails_for_good_ends_the_rollback(server: CelldServer, audit: Audit) -> None:
    audit.script["undo-g1b"] = ["never"]
    create(server, "give-up", {"audit": audit.url, "steps": ["g1a", "g1b", "g1c"], "failAt": "g1c"})
    done = wait_status(server, "give-up", "errored")
    assert done["error"] == {"name": "NonRetryableError", "message": "g1c broke"}
    assert done["rollback"] == {
        "outcome": "failed",
        "error": {"name": "NonRetryableError", "message": "undo g1b refused"},
    }
    assert undo_calls(audit, "g1") == ["undo-g1c", "undo-g1b"]  # g1a's handler never ran
    states = [s["state"] for s in server.describe(WORKFLOW, "give-up")["rollback"]["steps"]]
    assert states == ["done", "failed", "registered"]


def test_terminate_with_rollback_from_the_binding(server: CelldServer, audit: Audit) -> None:
    create(server, "term-1", {"audit": audit.url, "steps": ["t1a", "t1b"], "wait": True})
    wait_status(server, "term-1", "waiting")
    response = server.get("/terminate", params={"id": "term-1", "rollback": "1"})
    assert response.status_code == 200, response.text
    done = wait_status(server, "term-1", "terminated")
    assert done["rollback"] == {"outcome": "complete", "error": None}
    assert undo_calls(audit, "t1") == ["undo-t1a"]  # t1b never started
    body = next(b for s, b in audit.calls if s == "undo-t1a")
    assert body["error"] == "Error: Instance terminated during rollback"


def test_terminate_without_rollback_runs_no_handler(server: CelldServer, audit: Audit) -> None:
    create(server, "term-2", {"audit": audit.url, "steps": ["t2a"], "wait": True})
    wait_status(server, "term-2", "waiting")
    server.get("/terminate", params={"id": "term-2"})
    done = wait_status(server, "term-2", "terminated")
    assert "rollback" not in done
    assert undo_calls(audit, "t2") == []


def test_explorer_api_and_cli_terminate_with_rollback(server: CelldServer, audit: Audit) -> None:
    base = f"/cdn-cgi/local/explorer/api/workflows/{WORKFLOW}/instances"
    create(server, "term-3", {"audit": audit.url, "steps": ["t3a"], "wait": True})
    wait_status(server, "term-3", "waiting")
    refused = server.client.patch(
        f"{base}/term-3/status", json={"status": "pause", "rollback": True}
    )
    assert refused.status_code == 400
    assert "only valid when terminating" in refused.text
    changed = server.client.patch(
        f"{base}/term-3/status", json={"status": "terminate", "rollback": True}
    )
    assert changed.status_code == 200, changed.text
    done = wait_status(server, "term-3", "terminated")
    assert done["rollback"]["outcome"] == "complete"
    assert undo_calls(audit, "t3") == ["undo-t3a"]
    detail = server.get(f"{base}/term-3", headers={"x-celld-details": "1"}).json()["result"]
    assert detail["rollback"]["reason"] == "terminate"
    assert detail["rollback"]["steps"][0]["state"] == "done"

    create(server, "term-4", {"audit": audit.url, "steps": ["t4a"], "wait": True})
    wait_status(server, "term-4", "waiting")
    result = CliRunner().invoke(
        cli,
        ["workflows", "instances", "terminate", WORKFLOW, "term-4", "--rollback",
         "--port", str(server.port)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "term-4" in result.output
    wait_status(server, "term-4", "terminated")
    assert undo_calls(audit, "t4") == ["undo-t4a"]
    described = CliRunner().invoke(
        cli,
        ["workflows", "instances", "describe", WORKFLOW, "term-4", "--port", str(server.port)],
    )
    assert described.exit_code == 0, described.output
    assert "Rollback" in described.output and "complete" in described.output


def test_sigkill_mid_rollback_goes_on_and_never_reruns_a_finished_handler(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with audit_server() as audit:
        audit.script["undo-kb"] = ["hold"]
        server = CelldServer(PROJECT, state, manual_clock=True).start()
        try:
            params = {"audit": audit.url, "steps": ["ka", "kb", "kc", "kd"], "failAt": "kd"}
            create(server, "crash", params)
            server.wait_for(lambda: undo_calls(audit, "kb") == ["undo-kb"])  # held in kb
            assert undo_calls(audit, "k") == ["undo-kd", "undo-kc", "undo-kb"]
            assert status(server, "crash") == {"status": "running"}
            offset = server.clock_now()
        finally:
            server.kill()

        server = CelldServer(PROJECT, state, manual_clock=offset).start()
        try:
            done = wait_status(server, "crash", "errored")
            assert done["rollback"] == {"outcome": "complete", "error": None}
            assert done["error"] == {"name": "NonRetryableError", "message": "kd broke"}
        finally:
            server.stop()
    # kd's and kc's handlers finished before the crash: committed, never run again; kb's was
    # cut off and runs again (at least once); ka's runs once, after it.
    assert undo_calls(audit, "k") == ["undo-kd", "undo-kc", "undo-kb", "undo-kb", "undo-ka"]


def test_long_handler_retry_delay_hibernates_and_comes_back(
    server: CelldServer, audit: Audit
) -> None:
    audit.script["undo-h1a"] = ["fail"]
    undo_config = {"retries": {"limit": 1, "delay": "2 hours", "backoff": "constant"}}
    params = {"audit": audit.url, "steps": ["h1a", "h1b"], "failAt": "h1b"}
    create(server, "hibernate", {**params, "undoConfig": undo_config})

    def hibernated() -> bool:
        view = server.describe(WORKFLOW, "hibernate")
        steps = (view.get("rollback") or {}).get("steps") or [{}]
        return steps[-1].get("state") == "retrying" and not view["resident"]

    server.wait_for(hibernated)
    assert status(server, "hibernate") == {"status": "running"}
    server.advance(2 * 60 * MINUTE)
    done = wait_status(server, "hibernate", "errored")
    assert done["rollback"] == {"outcome": "complete", "error": None}
    assert undo_calls(audit, "h1") == ["undo-h1b", "undo-h1a", "undo-h1a"]
