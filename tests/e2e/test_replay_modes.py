"""Resident cells resolve pending promises; forced replay re-runs run() at every step.

Both paths must give identical results: the same workflow runs on a normal server and
on one started with CELLD_REPLAY_EVERY_STEP=1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

OPS: list[dict[str, Any]] = [
    {"event": True},
    {"do": "first", "ctx": True},
    {"parallel": [{"do": "left", "value": "L"}, {"do": "right", "returns": "map"}]},
    {"do": "repeat", "value": 1},
    {"do": "repeat", "value": 2},
    {"sleep": "nap", "duration": "1 hour"},
    {"do": "flaky", "fail": 2,
     "config": {"retries": {"limit": 3, "delay": 1000, "backoff": "linear"}}},
    {"do": "outer", "nested": [{"do": "inner", "value": "deep"}]},
    {"wait": "approval", "type": "approve"},
    {"do": "doomed", "always": True, "error": "type", "catch": True,
     "config": {"retries": {"limit": 1, "delay": 1000}}},
    {"do": "typed", "returns": "nested"},
]  # fmt: skip


def drive(server: CelldServer) -> dict[str, Any]:
    response = server.post("/create", params={"id": "same"}, json={"ops": OPS})
    assert response.status_code == 200, response.text

    def status() -> dict[str, Any]:
        return server.get("/status", params={"id": "same"}).json()

    def step(name: str) -> dict[str, Any]:
        return server.step("script-workflow", "same", name)

    server.wait_for(lambda: step("nap"))
    server.advance(3_600_000)
    for failed, delay in ((1, 1_000), (2, 2_000)):  # linear backoff: 1 s, then 2 s
        server.wait_for(lambda f=failed: step("flaky").get("failed_attempts") == f)
        server.advance(delay)
    server.wait_for(lambda: step("approval"))
    server.post("/event", params={"id": "same", "type": "approve"}, json={"ok": True})
    server.wait_for(lambda: step("doomed").get("failed_attempts") == 1)
    server.advance(1_000)
    return server.wait_for(lambda: (s := status())["status"] == "complete" and s)


def test_forced_replay_gives_the_same_results(tmp_path: Path) -> None:
    outputs = []
    for name, env in (("resident", {}), ("replay", {"CELLD_REPLAY_EVERY_STEP": "1"})):
        server = CelldServer(PROJECTS / "durable", tmp_path / name, manual_clock=True, env=env)
        server.start()
        try:
            outputs.append(drive(server))
        finally:
            server.stop()
    resident, replayed = outputs
    assert resident == replayed
    results = resident["output"]["results"]
    assert results[1]["ctx"]["step"] == {"name": "first", "count": 1}
    assert results[3:5] == [1, 2]
    assert results[6] == {"step": "flaky", "attempt": 3}
    assert results[7] == {"nested": ["deep"]}
    assert results[8]["payload"] == {"ok": True}
    assert results[9] == {"caught": {"name": "TypeError", "message": "doomed failed on attempt 2"}}
