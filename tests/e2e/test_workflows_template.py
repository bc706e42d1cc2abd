"""Cloudflare's Workflows starter template (tests/projects/workflows-starter-template, copied
unchanged from cloudflare/templates) served by a real `celld run`, driven as its page drives it.

The template is built by its own `npm run build` (TypeScript and Vite with the Cloudflare
plugin): the build writes the Worker and the page to dist/ and redirects the project to the
config it generated (.wrangler/deploy/config.json), which celld follows as wrangler dev does.
A client starts a workflow, connects to /ws (a Durable Object that accepts the socket with
the hibernation API) and sees every step the workflow reports, the approval it sends as an
event, and the end. wrangler dev 4.164.0 sent the same sequence of states for the same
drive (its status() adds the local-only `__LOCAL_DEV_STEP_OUTPUTS`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from compat.targets import ensure_node_modules
from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "workflows-starter-template"
STEPS = ["process data", "wait 2 seconds", "wait for approval", "final"]
WAIT_S = 60


def build(project: Path) -> None:
    """`npm ci` and the template's own build, unless dist/ is newer than every source."""
    if shutil.which("npm") is None and not (project / "node_modules").is_dir():
        pytest.skip("npm is not installed; `npm ci && npm run build` in the template to run this")
    ensure_node_modules(project)
    built = project / "dist" / "client" / "index.html"
    sources = [p for d in ("src", "worker") for p in (project / d).rglob("*") if p.is_file()]
    newest = max(p.stat().st_mtime for p in [*sources, project / "package-lock.json"])
    if built.is_file() and built.stat().st_mtime >= newest:
        return
    npm = shutil.which("npm")
    assert npm is not None
    subprocess.run([npm, "run", "build"], cwd=project, check=True, capture_output=True, timeout=600)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    build(PROJECT)
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("template") / "state", manual_clock=True)
    celld.start(timeout=90)
    yield celld
    celld.stop()


def test_the_page_is_the_vite_build(server: CelldServer) -> None:
    page = server.get("/")
    assert page.status_code == 200
    assert '<div id="root"></div>' in page.text
    script = next(
        line.split('src="')[1].split('"')[0] for line in page.text.splitlines() if "<script" in line
    )
    assert server.get(script).headers["content-type"].startswith("text/javascript")
    # single-page-application: a navigation to an unknown page is the app; any other request
    # for it goes to the Worker (wrangler dev answers both alike)
    navigate = {"Sec-Fetch-Mode": "navigate"}
    assert server.get("/some/page", headers=navigate).text == page.text
    assert server.get("/some/page").json() == {"error": "Not Found"}
    assert server.get("/api/nowhere").json() == {"error": "Not Found"}


def test_ws_route_needs_an_upgrade_and_an_instance(server: CelldServer) -> None:
    assert server.get("/ws").status_code == 400
    assert server.get("/ws", params={"instanceId": "x"}).status_code == 426


async def test_a_workflow_reports_each_step_over_the_socket(server: CelldServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        started = (await http.post("/api/workflow/start")).json()
        assert started["message"] == "Workflow started successfully"
        instance = started["instanceId"]
        states: list[dict[str, Any]] = []
        url = server.url.replace("http://", "ws://") + f"/ws?instanceId={instance}"
        async with connect(url) as ws:

            async def until(check: Any, what: str) -> dict[str, Any]:
                deadline = time.monotonic() + WAIT_S
                while True:
                    for state in states:
                        if check(state):
                            return state
                    remaining = deadline - time.monotonic()
                    assert remaining > 0, f"timed out waiting for {what}: {states}"
                    try:
                        message = await asyncio.wait_for(ws.recv(), remaining)
                    except TimeoutError:
                        continue
                    states.append(json.loads(message))

            first = await until(lambda s: True, "the state on connect")
            assert first["type"] == "workflow_update"
            assert list(first["stepStatuses"]) == STEPS
            await until(lambda s: s["stepStatuses"]["wait 2 seconds"] == "running", "the sleep")
            server.post("/cdn-cgi/celld/clock", params={"advance": 2_000})
            await until(
                lambda s: s["stepStatuses"]["wait for approval"] == "waiting", "the approval wait"
            )
            await ws.send("anything")  # webSocketMessage answers with the current state
            answered = await until(
                lambda s: s is not states[0] and s["currentStep"] == "wait for approval",
                "the answer",
            )
            assert answered["workflowStatus"] == "running"
            sent = await http.post(
                f"/api/workflow/event/{instance}", json={"approved": True, "comment": "ok"}
            )
            assert sent.json() == {"success": True, "message": "Event sent successfully"}
            done = await until(lambda s: s["workflowStatus"] == "completed", "the end")
            assert done["stepStatuses"] == dict.fromkeys(STEPS, "completed")
            assert done["currentStep"] is None
        # every step went running (or waiting) then completed, in order
        transitions: list[tuple[str, str]] = []
        for state in states:
            for step, status in state["stepStatuses"].items():
                if status != "pending" and (step, status) not in transitions:
                    transitions.append((step, status))
        assert transitions == [
            ("process data", "running"),
            ("process data", "completed"),
            ("wait 2 seconds", "running"),
            ("wait 2 seconds", "completed"),
            ("wait for approval", "waiting"),
            ("wait for approval", "completed"),
            ("final", "running"),
            ("final", "completed"),
        ]
        # The object heard "final: completed" from the run's last step, before run() returned
        # and its end was committed: the instance reads complete once that lands.
        deadline = time.monotonic() + WAIT_S
        while (status := (await http.get(f"/api/workflow/status/{instance}")).json())[
            "status"
        ] == "running":
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.05)
        assert status["status"] == "complete"
