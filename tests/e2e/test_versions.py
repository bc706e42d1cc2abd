"""Version pinning end to end: an instance started on one version of the Worker, replayed by
another after a restart. Code that changes the instance's steps fails it with a clear error;
correct code (parallel steps with Promise.all and Promise.race included) runs on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.celld_server import CelldServer

HOUR = 3_600_000
T0 = 1_767_226_200_000

WORKER = """
import { WorkflowEntrypoint } from "cloudflare:workers";

export class Flow extends WorkflowEntrypoint {
  async run(event, step) {
%s
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const id = url.searchParams.get("id");
    if (url.pathname === "/create") {
      await env.FLOW.create({ id });
      return Response.json({ id });
    }
    const instance = await env.FLOW.get(id);
    return Response.json(await instance.status());
  }
};
"""

SEQUENTIAL = """
    const a = await step.do("a", async () => 1);
    %s
    const b = await step.do("b", async () => 2);
    await step.sleep("nap", "1 hour");
    const c = await step.do("c", async () => 3);
    return a + b + c;
"""

# Branch one has one recorded step and may gain a new one; branch two has four recorded
# steps and a sleep: a replay reaches branch one's new step while branch two still has
# recorded steps to go through.
PARALLEL = """
    const [one, two] = await Promise.all([
      (async () => {
        const p = await step.do("p1", async () => 1);
        %s
        return p;
      })(),
      (async () => {
        let sum = 0;
        for (let i = 1; i <= 4; i++) sum += await step.do(`q${i}`, async () => i);
        await step.sleep("q-nap", "1 hour");
        return sum + await step.do("q5", async () => 5);
      })(),
    ]);
    return one + two;
"""

RACE = """
    const first = await Promise.race([
      step.do("fast", async () => "fast"),
      step.sleep("slow timer", "50 minutes").then(() => "timer"),
    ]);
    const after = await step.do("after", async () => first + "!");
    await step.sleep("nap", "10 minutes");
    %s
    return await step.do("end", async () => after);
"""


def project(root: Path, body: str) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "wrangler.json").write_text(
        json.dumps(
            {
                "name": "versions",
                "main": "src/index.js",
                "compatibility_date": "2026-11-01",
                "workflows": [{"name": "flow", "binding": "FLOW", "class_name": "Flow"}],
            }
        )
    )
    (root / "src" / "index.js").write_text(WORKER % body)
    return root


def status(server: CelldServer, instance_id: str) -> dict[str, Any]:
    return dict(server.get("/status", params={"id": instance_id}).json())


def until(server: CelldServer, instance_id: str, wanted: str) -> dict[str, Any]:
    return dict(
        server.wait_for(lambda: (s := status(server, instance_id))["status"] == wanted and s)
    )


def version_of(server: CelldServer, instance_id: str) -> str:
    return str(server.describe("flow", instance_id)["version"])


def start_then_replace(tmp_path: Path, v1: str, v2: str) -> tuple[CelldServer, str, str]:
    """Run v1 until the instance sleeps, stop celld, start v2 on the same state; returns
    the v2 server and both versions."""
    root, state = tmp_path / "project", tmp_path / "state"
    server = CelldServer(project(root, v1), state, manual_clock=T0).start()
    try:
        server.post("/create", params={"id": "i"}).raise_for_status()
        until(server, "i", "waiting")
        started = version_of(server, "i")
    finally:
        server.stop()
    server = CelldServer(project(root, v2), state, manual_clock=T0 + 1000).start()
    current = server.get(
        "/cdn-cgi/local/explorer/api/workflows/flow", headers={"x-celld-details": "1"}
    ).json()["result"]["version"]
    assert started != current
    assert version_of(server, "i") == started  # recorded at start, shown in describe
    return server, started, current


def test_inserted_step_fails_the_instance_naming_steps_and_versions(tmp_path: Path) -> None:
    v1 = SEQUENTIAL % ""
    v2 = SEQUENTIAL % 'await step.do("x", async () => 0);'
    server, started, current = start_then_replace(tmp_path, v1, v2)
    try:
        server.advance(HOUR)
        error = until(server, "i", "errored")["error"]
        assert error["name"] == "WorkflowFatalError"
        message = error["message"]
        assert f"started on version {started}" in message
        assert f"replayed by version {current}" in message
        assert '"x" (do #1)' in message
        assert '"b" (do #1)' in message and '"nap" (sleep #1)' in message
        steps = [s["name"] for s in server.describe("flow", "i")["steps"]]
        assert "x" not in steps  # the new step never ran on top of the old history
    finally:
        server.stop()


def test_new_step_after_the_history_runs_on(tmp_path: Path) -> None:
    v1 = SEQUENTIAL % ""
    v2 = (SEQUENTIAL % "").replace("return a + b + c;", 'await step.do("d", async () => 4);\n'
                                                          "    return a + b + c;")  # fmt: skip
    server, _, _ = start_then_replace(tmp_path, v1, v2)
    try:
        server.advance(HOUR)
        assert until(server, "i", "complete")["output"] == 6
    finally:
        server.stop()


def test_promise_all_branch_with_a_new_step_never_trips_the_check(tmp_path: Path) -> None:
    """v2 adds a step at the end of branch one, which the replay reaches while branch two
    still replays its recorded steps: correct code, it runs on."""
    v1 = PARALLEL % ""
    v2 = PARALLEL % 'await step.do("p2", async () => 10);'
    server, _, _ = start_then_replace(tmp_path, v1, v2)
    try:
        server.advance(HOUR)
        assert until(server, "i", "complete")["output"] == 1 + 15
        names = [s["name"] for s in server.describe("flow", "i")["steps"]]
        assert "p2" in names and "q5" in names
    finally:
        server.stop()


def test_promise_all_unchanged_steps_under_a_new_version(tmp_path: Path) -> None:
    server, _, _ = start_then_replace(tmp_path, PARALLEL % "", PARALLEL % "// v2")
    try:
        server.advance(HOUR)
        assert until(server, "i", "complete")["output"] == 16
    finally:
        server.stop()


def test_promise_race_under_a_new_version(tmp_path: Path) -> None:
    """The race's loser (a 50-minute timer) is still sleeping when the replay asks new
    steps: both contenders were asked, so nothing trips."""
    v1 = RACE % ""
    v2 = RACE % 'await step.do("extra", async () => 0);'
    server, _, _ = start_then_replace(tmp_path, v1, v2)
    try:
        server.advance(10 * 60_000)
        assert until(server, "i", "complete")["output"] == "fast!"
    finally:
        server.stop()
