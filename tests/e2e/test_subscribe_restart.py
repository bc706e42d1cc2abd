"""subscribe() across a restart: the event log is durable, so a cursor taken before celld
stopped resumes after it, and events of the new process follow in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.celld_server import CelldServer
from tests.e2e.conftest import REPO

CORE = REPO / "compat" / "projects" / "core"
OPS = [{"do": "a"}, {"sleep": "nap", "duration": 60_000}, {"do": "b"}]


def subscribe(server: CelldServer, instance_id: str, **query: Any) -> dict[str, Any]:
    response = server.post("/subscribe", params={"id": instance_id, **query})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_cursor_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(CORE, state, manual_clock=True).start()
    try:
        server.post("/create", params={"id": "s1"}, json={"ops": OPS}).raise_for_status()
        server.wait_for(
            lambda: server.get("/status", params={"id": "s1"}).json()["status"] == "waiting"
        )
        before = subscribe(server, "s1", filter="step_completed,sleep_started", max=2)
        assert [e["type"] for e in before["events"]] == ["step_completed", "sleep_started"]
        cursor = before["lastEventId"]
    finally:
        server.kill()
    server = CelldServer(CORE, state, manual_clock=True).start()
    try:
        server.advance(60_000)
        after = subscribe(server, "s1", filter="step_completed,sleep_completed,workflow_completed",
                          cursor=cursor)  # fmt: skip
        assert after["ordered"] and after["ended"]
        assert [(e["type"], e.get("stepName")) for e in after["events"]] == [
            ("sleep_completed", "nap-1"),
            ("step_completed", "b-1"),
            ("workflow_completed", None),
        ]
    finally:
        server.stop()
