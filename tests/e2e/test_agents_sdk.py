"""A project built on Cloudflare's Agents SDK (npm `agents`, tests/projects/agents) served by
a real `celld run` and driven by the SDK's own client: tests/projects/agents/drive.mjs runs
`AgentClient` from `agents/client` under Node 22 (the npm `node` package of tests/wrangler).

The agent's state is synced to the client over the WebSocket (`setState`, the client's
`onStateUpdate` and its own `setState`), `@callable()` methods answer RPC calls, `this.sql`
keeps notes, `this.schedule` runs a delay and a cron (on the object's alarm), and a Workflow
the agent starts with `runWorkflow` (an `AgentWorkflow`) calls the agent back over RPC and
reports its progress and result. `WRANGLER` is what the same driver printed against wrangler
dev 4.164.0 (workerd 2026-11-17): celld must print the same.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from compat.targets import ensure_node_modules
from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS, REPO

PROJECT = PROJECTS / "agents"
NODE = REPO / "tests" / "wrangler" / "node_modules" / "node" / "bin" / "node"

WRANGLER = {
    "initial": {"count": 0, "ticks": 0, "delayed": [], "steps": [], "workflow": None},
    "increment": 5,
    "afterIncrement": 5,
    "clientSet": 101,
    "notes": [{"id": 1, "text": "first"}],
    "notes2": [{"id": 1, "text": "first"}, {"id": 2, "text": "second"}],
    "later": {"type": "delayed", "callback": "delayed", "inSeconds": 2},
    "schedules": [{"type": "delayed", "callback": "delayed"}],
    "every": {"type": "cron", "callback": "tick", "cron": "* * * * * *"},
    "delayed": ["two seconds"],
    "ticked": True,
    "stopped": 1,
    "schedulesAfter": [],
    "started": True,
    "workflow": {"status": "complete", "result": {"doubled": 42, "notes": 3}},
    "steps": ["double", "record"],
    "finalNotes": [
        {"id": 1, "text": "first"},
        {"id": 2, "text": "second"},
        {"id": 3, "text": "report: 42"},
    ],
    "notCallable": "Method record is not callable",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    if not NODE.exists():
        if os.environ.get("CI"):
            raise RuntimeError("Node is not installed: run `npm ci` in tests/wrangler")
        pytest.skip("Node is not installed: run `npm ci` in tests/wrangler")
    ensure_node_modules(PROJECT)
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("agents") / "state")
    celld.start(timeout=90)
    yield celld
    celld.stop()


def drive(server: CelldServer, name: str) -> dict[str, object]:
    host = server.url.removeprefix("http://")
    done = subprocess.run(
        [str(NODE), "drive.mjs", host, name],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_sdk_client_sees_what_it_sees_under_wrangler_dev(server: CelldServer) -> None:
    assert drive(server, "first") == WRANGLER
