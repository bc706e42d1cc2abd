"""`celld workflows ...` (celld's own CLI, no Node) against a real `celld run`.

The commands run in-process through click's runner (the real commands, real HTTP to a
real server); one runs as `python -m celld` to check the entry point.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from celld.cli.main import cli
from celld.client import Client
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

HOUR = 3_600_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(
        PROJECTS / "operator", tmp_path_factory.mktemp("cli") / "state", manual_clock=True
    )
    celld.start()
    yield celld
    celld.stop()


@pytest.fixture(scope="module")
def client(server: CelldServer) -> Iterator[Client]:
    with Client(server.url) as celld:
        yield celld


def run(server: CelldServer, *args: str, ok: bool = True) -> str:
    result = CliRunner().invoke(cli, ["workflows", *args, "--port", str(server.port)])
    assert (result.exit_code == 0) == ok, f"{args}: exit {result.exit_code}\n{result.output}"
    return result.output


def run_json(server: CelldServer, *args: str) -> Any:
    return json.loads(run(server, *args, "--json"))


def test_entry_point_lists_workflows(server: CelldServer) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "celld", "workflows", "list", "--local", "--port", str(server.port)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "order-workflow" in done.stdout and "QuickWorkflow" in done.stdout


def test_workflow_list_and_describe(server: CelldServer) -> None:
    assert [w["name"] for w in run_json(server, "list")] == ["order-workflow", "quick-workflow"]
    text = run(server, "describe", "order-workflow")
    assert "Class Name:  OrderWorkflow" in text and "Instance Status Counts:" in text


def test_an_instance_from_trigger_to_complete(server: CelldServer, client: Client) -> None:
    assert run_json(server, "trigger", "order-workflow", '{"order": 5}', "--id", "cli-1") == {
        "id": "cli-1"
    }
    instance = client.workflow("order-workflow").get("cli-1")
    instance.wait_until_settled()
    described = run_json(server, "instances", "describe", "order-workflow", "cli-1")
    assert described["id"] == "cli-1" and described["status"] == "waiting"
    text = run(server, "instances", "describe", "order-workflow", "latest")
    assert "Instance Id:   cli-1" in text and "Sleeps Until:" in text and "[REDACTED]" in text
    assert "s3cr3t" not in text
    assert "paused" in run(server, "instances", "pause", "order-workflow", "cli-1")
    assert run_json(server, "instances", "resume", "order-workflow", "latest")["status"]
    instance.wait_until_settled()
    client.advance_clock(HOUR)
    instance.wait_until_settled()
    text = run(server, "instances", "describe", "order-workflow", "cli-1", "--no-step-output")
    assert "Event Type:   approve" in text and "Times Out At:" in text and "Output:" not in text
    out = run(
        server, "instances", "send-event", "order-workflow", "cli-1",
        "--type", "approve", "--payload", '{"ok": 1}',
    )  # fmt: skip
    assert 'The event "approve" was sent' in out
    assert instance.wait_for_status("complete")["output"]["approval"] == {"ok": 1}
    text = run(server, "instances", "describe", "order-workflow", "cli-1")
    assert "✅ Completed" in text and "Events:" in text
    restarted = run_json(
        server, "instances", "restart", "order-workflow", "cli-1",
        "--from-step-name", "ship", "--from-step-type", "do",
    )  # fmt: skip
    assert restarted["status"] in ("queued", "running", "waiting", "complete")
    assert instance.wait_for_status("complete")["output"]["shipped"] == {"shipped": 5}


def test_instances_list_table_json_and_filters(server: CelldServer, client: Client) -> None:
    quick = client.workflow("quick-workflow")
    for n in range(3):
        client.advance_clock(1_000)
        quick.create(id=f"cq-{n}", params=n).wait_for_status("complete")
    listed = run_json(server, "instances", "list", "quick-workflow", "--per-page", "2")
    assert [i["id"] for i in listed] == ["cq-2", "cq-1"]
    reverse = run_json(server, "instances", "list", "quick-workflow", "--reverse")
    assert [i["id"] for i in reverse] == ["cq-0", "cq-1", "cq-2"]
    table = run(server, "instances", "list", "quick-workflow", "--status", "complete")
    assert table.splitlines()[0] == "Showing 3 of 3 instances (page 1 of 1):"
    assert "cq-0" in table and "✅ Completed" in table
    empty = run(server, "instances", "list", "quick-workflow", "--status", "errored")
    assert 'There are no instances in workflow "quick-workflow"' in empty


def test_errors_are_clear_and_exit_nonzero(server: CelldServer, client: Client) -> None:
    client.workflow("quick-workflow").create(id="cli-err").wait_for_status("complete")
    cases = [
        (("instances", "describe", "quick-workflow", "missing"), "not found"),
        (("instances", "terminate", "quick-workflow", "cli-err"), "cannot_terminate"),
        (("instances", "terminate", "quick-workflow", "cli-err", "--rollback"),
         "cannot_terminate"),
        (("describe", "no-such-workflow"), "Workflow 'no-such-workflow' not found."),
        (("trigger", "quick-workflow", "{not json"), "PARAMS is not valid JSON"),
        (("instances", "send-event", "quick-workflow", "cli-err", "--type", "x", "--payload",
          "{"), "--payload is not valid JSON"),
        (("instances", "delete", "quick-workflow", "never-made"), "not_found"),
        (("delete", "no-such-workflow"), "Workflow 'no-such-workflow' not found."),
        (("instances", "restart", "quick-workflow", "cli-err", "--from-step-count", "2"),
         "need --from-step-name"),
    ]  # fmt: skip
    for args, message in cases:
        assert message in run(server, *args, ok=False), args
    unreachable = CliRunner().invoke(cli, ["workflows", "list", "--port", "9"])
    assert unreachable.exit_code == 1 and "could not reach celld" in unreachable.output
