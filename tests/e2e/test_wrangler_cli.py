"""The real, unchanged wrangler CLI (`wrangler workflows ... --local --port P`) against
`celld run`: every command it has for local instances goes through celld's local
explorer API.

wrangler and Node 22 come from npm (tests/wrangler/package-lock.json; `.ci/run` runs
`npm ci` there). Without them the tests are skipped locally and fail in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celld.client import Client
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS, REPO

WRANGLER_DIR = REPO / "tests" / "wrangler"
MODULES = WRANGLER_DIR / "node_modules"
NODE = MODULES / "node" / "bin" / "node"
WRANGLER = MODULES / "wrangler" / "bin" / "wrangler.js"
HOUR = 3_600_000

if not (NODE.exists() and WRANGLER.exists()):
    if os.environ.get("CI"):
        raise RuntimeError(f"wrangler is not installed: run `npm ci` in {WRANGLER_DIR}")
    pytest.skip(
        f"wrangler is not installed: run `npm ci` in {WRANGLER_DIR}", allow_module_level=True
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(
        PROJECTS / "operator", tmp_path_factory.mktemp("wr") / "state", manual_clock=True
    )
    celld.start()
    yield celld
    celld.stop()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wrangler-home")


def wrangler(server: CelldServer, home: Path, *args: str, ok: bool = True) -> str:
    """Run `wrangler workflows ARGS --local --port P`; its stdout and stderr together."""
    env = {
        "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "WRANGLER_SEND_METRICS": "false",
        "WRANGLER_SEND_ERROR_REPORTS": "false",
        "DO_NOT_TRACK": "1",
        "CI": "true",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "WRANGLER_LOG_PATH": str(home / "logs"),
    }
    command = [str(NODE), str(WRANGLER), "workflows", *args, "--local", "--port", str(server.port)]
    done = subprocess.run(
        command, cwd=home, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    output = done.stdout + done.stderr
    assert (done.returncode == 0) == ok, f"{command}\nexit {done.returncode}\n{output}"
    return output


def wrangler_json(server: CelldServer, home: Path, *args: str) -> Any:
    return json.loads(wrangler(server, home, *args, "--json"))


def test_list_and_describe_workflows(server: CelldServer, home: Path) -> None:
    listed = wrangler_json(server, home, "list")
    assert {w["name"] for w in listed} == {"order-workflow", "quick-workflow"}
    table = wrangler(server, home, "list")
    assert "order-workflow" in table and "OrderWorkflow" in table
    details = wrangler_json(server, home, "describe", "order-workflow")
    assert details["class_name"] == "OrderWorkflow" and "waiting" in details["instances"]


def test_trigger_and_drive_an_instance(server: CelldServer, home: Path) -> None:
    triggered = wrangler_json(
        server, home, "trigger", "order-workflow", '{"order": 11, "fail": 1}', "--id", "wr-1"
    )
    assert triggered == {"id": "wr-1"}
    with Client(server.url) as client:
        instance = client.workflow("order-workflow").get("wr-1")
        instance.wait_until_settled()
        details = wrangler_json(server, home, "instances", "describe", "order-workflow", "wr-1")
        # steps named as wrangler dev's local explorer names them: <name>-<count>
        charge = next(s for s in details["steps"] if s["name"] == "charge card-1")
        assert charge["success"] is None and charge["attempts"][0]["success"] is False
        assert charge["attempts"][0]["error"] == {
            "name": "Error",
            "message": "card declined on attempt 1",
        }
        assert charge["attempts"][0]["start"] and charge["attempts"][0]["end"]
        assert "versionId" not in details and "count" not in charge  # celld's own, not asked
        text = wrangler(server, home, "instances", "describe", "order-workflow", "wr-1")
        assert "card declined on attempt 1" in text and "look up order-1" in text
        client.advance_clock(5_000)
        instance.wait_until_settled()

        out = wrangler(server, home, "instances", "pause", "order-workflow", "wr-1")
        assert "paused" in out and instance.status()["status"] == "paused"
        out = wrangler(server, home, "instances", "resume", "order-workflow", "wr-1")
        assert "resumed" in out
        instance.wait_until_settled()
        client.advance_clock(HOUR)
        instance.wait_until_settled()
        out = wrangler(
            server, home, "instances", "send-event", "order-workflow", "wr-1",
            "--type", "approve", "--payload", '{"by": "wrangler"}',
        )  # fmt: skip
        assert "approve" in out
        done = instance.wait_for_status("complete")
        assert done["output"]["approval"] == {"by": "wrangler"}
        assert done["output"]["charge"] == {"charged": True, "attempt": 2}

        described = wrangler_json(server, home, "instances", "describe", "order-workflow", "wr-1")
        assert described["status"] == "complete"
        secret = next(s for s in described["steps"] if s["name"] == "issue secret-1")
        assert secret["output"] == "[REDACTED]"
        kinds = [s["type"] for s in described["steps"]]
        assert kinds == ["step", "step", "step", "sleep", "waitForEvent", "step"]

        out = wrangler(
            server, home, "instances", "restart", "order-workflow", "wr-1",
            "--from-step-name", "ship",
        )  # fmt: skip
        assert "restarted" in out
        assert instance.wait_for_status("complete")["output"]["shipped"] == {"shipped": 11}


def test_instances_list_pages_and_filters(server: CelldServer, home: Path) -> None:
    with Client(server.url) as client:
        quick = client.workflow("quick-workflow")
        for n in range(4):
            client.advance_clock(1_000)
            quick.create(id=f"wq-{n}", params=n).wait_for_status("complete")
    page = wrangler_json(server, home, "instances", "list", "quick-workflow", "--per-page", "3")
    assert [i["id"] for i in page] == ["wq-3", "wq-2", "wq-1"]
    second = wrangler_json(
        server, home, "instances", "list", "quick-workflow", "--per-page", "3", "--page", "2"
    )
    assert [i["id"] for i in second] == ["wq-0"]
    filtered = wrangler_json(
        server, home, "instances", "list", "quick-workflow", "--status", "paused"
    )
    assert filtered == []
    table = wrangler(server, home, "instances", "list", "quick-workflow", "--status", "complete")
    assert "wq-3" in table and "Completed" in table


def test_terminate_latest_and_refusals(server: CelldServer, home: Path) -> None:
    with Client(server.url) as client:
        client.advance_clock(1_000)
        instance = client.workflow("order-workflow").create(id="wr-term", params={"order": 1})
        instance.wait_until_settled()
        out = wrangler(server, home, "instances", "terminate", "order-workflow", "latest")
        assert "wr-term" in out and "terminated" in out
        assert instance.status()["status"] == "terminated"
    again = wrangler(server, home, "instances", "terminate", "order-workflow", "wr-term", ok=False)
    assert "cannot_terminate" in again
    missing = wrangler(server, home, "instances", "describe", "order-workflow", "nope", ok=False)
    assert "Workflow instance 'nope' not found." in missing
    deleted = wrangler(server, home, "instances", "delete", "order-workflow", "wr-term")
    assert "wr-term" in deleted
    gone = wrangler(server, home, "instances", "describe", "order-workflow", "wr-term", ok=False)
    assert "Workflow instance 'wr-term' not found." in gone
    twice = wrangler(server, home, "instances", "delete", "order-workflow", "wr-term", ok=False)
    assert "not_found" in twice


@pytest.fixture(scope="module")
def saga_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(
        PROJECTS / "rollback", tmp_path_factory.mktemp("wr-rb") / "state", manual_clock=True
    )
    celld.start()
    yield celld
    celld.stop()


def test_terminate_with_rollback(saga_server: CelldServer, home: Path) -> None:
    """`--rollback` runs the handlers before the instance is terminated. The handler reports
    to an address that refuses connections, so it fails and is retried: the rollback is
    still going (`running`) until the clock moves, and then fails for good."""
    params = {"audit": "http://127.0.0.1:9/", "steps": ["a"], "wait": True}
    created = saga_server.post("/create", params={"id": "wr-rb"}, json=params)
    assert created.status_code == 200, created.text
    saga_server.wait_for(
        lambda: saga_server.get("/status", params={"id": "wr-rb"}).json()["status"] == "waiting"
    )
    out = wrangler(saga_server, home, "instances", "terminate", "saga-test", "wr-rb", "--rollback")
    assert "wr-rb" in out and "terminated successfully" in out
    detail = saga_server.describe("saga-test", "wr-rb")
    assert detail["rollback"]["reason"] == "terminate"
    saga_server.wait_for(
        lambda: (
            saga_server.describe("saga-test", "wr-rb")["rollback"]["steps"][0]["state"]
            == "retrying"
        )
    )
    # the default rollbackConfig: 5 retries, exponential from 10 s; each hour of engine
    # time lets the next attempt run (once the previous one has been reported)
    view: dict[str, Any] = {}
    for _ in range(100):
        view = saga_server.get("/status", params={"id": "wr-rb"}).json()
        if view["status"] == "terminated":
            break
        saga_server.advance(HOUR)
        time.sleep(0.1)
    assert view["status"] == "terminated"
    assert view["rollback"]["outcome"] == "failed"
