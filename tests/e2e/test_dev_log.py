"""What `celld run` prints, as a `wrangler dev` user expects it: a line per request, the
instances' lifecycle, "serving" once the port listens, a line on stop, a clear error for a
port in use; `--log-format json` and `--log-level` for machines."""

from __future__ import annotations

import json
import re
import signal
import socket
from pathlib import Path

import httpx
import pytest

from celld.client import Client
from tests.celld_run import CelldRun
from tests.celld_server import CelldServer

WORKER = """
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

export class Flow extends WorkflowEntrypoint {
  async run(event, step) {
    const p = event.payload || {};
    await step.do("first", async () => 1);
    if (p.fail) await step.do("boom", async () => { throw new NonRetryableError("no way"); });
    if (p.wait) await step.waitForEvent("go", { type: "go", timeout: "1 hour" });
    return "done";
  }
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/teapot") return new Response("short and stout", { status: 418 });
    if (url.pathname === "/throw") throw new Error("thrown on purpose");
    return new Response("hello");
  },
};
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "index.js").write_text(WORKER)
    (root / "wrangler.toml").write_text(
        'name = "logs"\nmain = "src/index.js"\ncompatibility_date = "2026-11-01"\n'
        '[[workflows]]\nname = "flow"\nbinding = "FLOW"\nclass_name = "Flow"\n'
    )
    return root


def test_a_line_per_request_lifecycle_lines_and_a_line_on_stop(
    project: Path, tmp_path: Path
) -> None:
    run = CelldRun(project, tmp_path / "state", "--port", "0")
    try:
        url = run.ready()
        with httpx.Client(base_url=url, timeout=30) as http:
            assert http.get("/hello/there", params={"q": "1"}).status_code == 200
            assert http.get("/teapot").status_code == 418
            assert http.post("/throw", content=b"x").status_code == 500
        run.wait_for(r"POST /throw")
        with Client(url) as client:
            flow = client.workflow("flow")
            flow.create(id="ok").wait_for_status("complete")
            flow.create(id="bad", params={"fail": True}).wait_for_status("errored")
            waiting = flow.create(id="w", params={"wait": True})
            waiting.wait_for_status("waiting")
            waiting.pause()
            waiting.wait_for_status("paused")
            waiting.resume()
            waiting.wait_for_status("waiting")
            waiting.restart()
            waiting.wait_for_status("waiting")
            waiting.terminate()
            waiting.wait_for_status("terminated")
            waiting.delete()
        run.wait_for(r"flow instance w deleted")
        # a clean stop, then the signal re-raised (uvicorn's way): SIGTERM's exit status
        assert run.stop() in (0, -signal.SIGTERM)
    finally:
        run.kill()
    log = run.log()
    lines = log.splitlines()
    # wrangler dev's shape: [<who>:info] METHOD PATH STATUS TEXT (Nms); the path has no query
    assert re.search(r"^\[celld:info\] GET /hello/there 200 OK \(\d+ms\)$", log, re.M), log
    assert re.search(r"^\[celld:info\] GET /teapot 418 I'm a Teapot \(\d+ms\)$", log, re.M)
    assert re.search(r"^\[celld:info\] POST /throw 500 Internal Server Error \(\d+ms\)$", log, re.M)
    assert "\x1b[" not in log  # not a terminal: no colours
    for line in (
        "flow instance ok created",
        "flow instance bad created",
        "flow instance bad errored: NonRetryableError: no way",
        "flow instance w paused",
        "flow instance w resumed",
        "flow instance w restarted",
        "flow instance w terminated",
        "flow instance w deleted",
    ):
        assert f"[celld:info] {line}" in lines, (line, log)
    assert re.search(r"^\[celld:info\] flow instance ok completed in \d+\.\d\ds$", log, re.M)
    # each change once, in order
    assert [line.split(" w ")[-1] for line in lines if " instance w " in line] == [
        "created", "paused", "resumed", "restarted", "terminated", "deleted",
    ]  # fmt: skip
    assert lines.index(
        "[celld:info] stopping (SIGTERM): in-flight requests get up to 10s to finish"
    ) < (lines.index("[celld:info] stopped"))
    assert lines[-1] == "[celld:info] stopped"


def test_serving_is_said_once_the_port_listens(project: Path, tmp_path: Path) -> None:
    run = CelldRun(project, tmp_path / "state", "--port", "0")
    try:
        url = run.ready()
        # the moment the line is there, the port answers (no retry needed)
        assert httpx.get(f"{url}/", timeout=30).text == "hello"
        assert re.search(r"^\[celld:info\] celld \S+: serving logs on http://127\.0\.0\.1:\d+$",
                         run.log(), re.M)  # fmt: skip
    finally:
        run.stop()


def test_a_port_in_use_is_refused_by_name_before_anything_starts(
    project: Path, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = CelldRun(project, tmp_path / "state", "--port", str(port))
        try:
            assert run.exit_code() == 1
        finally:
            run.kill()
    log = run.log()
    assert f"port {port} is already in use on 127.0.0.1" in log, log
    assert "--port" in log
    assert "serving" not in log and "Traceback" not in log
    assert not (tmp_path / "state" / "workflows.sqlite3").exists()  # nothing was started


def test_json_lines_for_machines(project: Path, tmp_path: Path) -> None:
    run = CelldRun(project, tmp_path / "state", "--port", "0", "--log-format", "json")
    try:
        url = run.ready()
        assert httpx.get(f"{url}/teapot", timeout=30).status_code == 418
        with Client(url) as client:
            client.workflow("flow").create(id="j1").wait_for_status("complete")
        run.wait_for(r'"event":"completed"')
    finally:
        run.stop()
    entries = [json.loads(line) for line in run.log().splitlines()]
    request = next(e for e in entries if e.get("path") == "/teapot")
    assert request["method"] == "GET" and request["status"] == 418
    assert request["level"] == "info" and request["logger"] == "celld.request"
    assert isinstance(request["duration_ms"], int) and request["time"].endswith("Z")
    assert request["message"].startswith("GET /teapot 418 I'm a Teapot (")
    events = [(e["instance"], e["event"]) for e in entries if e.get("workflow") == "flow"]
    assert events == [("j1", "created"), ("j1", "completed")]
    assert entries[-1]["message"] == "stopped"


def test_warning_level_leaves_requests_and_lifecycle_out(project: Path, tmp_path: Path) -> None:
    server = CelldServer(project, tmp_path / "state", args=("--log-level", "warning")).start()
    try:
        assert server.get("/teapot").status_code == 418
        with Client(server.url) as client:
            client.workflow("flow").create(id="quiet").wait_for_status("complete")
    finally:
        server.stop()
    log = server.log()
    assert "/teapot" not in log and "quiet" not in log and "serving" not in log, log


def test_colours_on_a_terminal(project: Path, tmp_path: Path) -> None:
    run = CelldRun(project, tmp_path / "state", "--port", "0", env={"FORCE_COLOR": "1"})
    try:
        url = run.ready()
        assert httpx.get(f"{url}/teapot", timeout=30).status_code == 418
        run.wait_for("teapot")
    finally:
        run.stop()
    line = next(line for line in run.log().splitlines() if "/teapot" in line)
    # green prefix, bold method, the status in yellow (4xx) and bold, the time in grey
    assert line.startswith("\x1b[32m[celld:info]\x1b[39m ")
    assert "\x1b[1mGET\x1b[22m /teapot \x1b[33m\x1b[1m418\x1b[22m I'm a Teapot" in line
    assert re.search(r"\x1b\[90m\(\d+ms\)\x1b\[39m", line)
