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


BURST = [{"do": "a"}, {"do": "b"}, {"sleep": "nap", "duration": 60_000}, {"do": "c"}]
STEPS = ["a-1", "b-1", "c-1"]


def test_a_kill_mid_burst_loses_no_logged_event(tmp_path: Path) -> None:
    """kill -9 while a burst of instances runs: after the restart every instance's log has
    each of its events exactly once, in order, from its creation to its end (a step's
    events are stored packed; what landed before the kill is all there, what did not is
    logged when it happens again)."""
    state = tmp_path / "state"
    ids = [f"k{i}" for i in range(24)]
    server = CelldServer(CORE, state, manual_clock=True).start()
    try:
        for instance_id in ids:
            server.post("/create", params={"id": instance_id}, json={"ops": BURST})
        server.wait_for(
            lambda: server.get("/status", params={"id": ids[0]}).json()["status"] == "waiting"
        )
    finally:
        server.kill()  # SIGKILL: the later instances are queued or mid-run
    server = CelldServer(CORE, state, manual_clock=True).start()
    try:
        server.wait_for(
            lambda: all(
                server.get("/status", params={"id": i}).json()["status"] == "waiting" for i in ids
            ),
            timeout=60,
        )
        server.advance(60_000)
        server.wait_for(
            lambda: all(
                server.get("/status", params={"id": i}).json()["status"] == "complete" for i in ids
            ),
            timeout=60,
        )
        for instance_id in ids:
            got = subscribe(server, instance_id)
            assert got["ordered"] and got["ended"] and got["fieldsOk"], got
            kinds = [(e["type"], e.get("stepName")) for e in got["events"]]
            assert kinds[0] == ("workflow_queued", None)
            assert kinds[-1] == ("workflow_completed", None)
            for name in STEPS:
                mine = [kind for kind, step in kinds if step == name]
                assert mine == [
                    "step_started", "attempt_started", "attempt_completed", "step_completed"
                ], (instance_id, kinds)  # fmt: skip
            assert [k for k, step in kinds if step == "nap-1"] == [
                "sleep_started",
                "sleep_completed",
            ]
            # a cursor inside what was stored as one row resumes right after it
            first = subscribe(server, instance_id, max=3)
            rest = subscribe(server, instance_id, cursor=first["lastEventId"])
            assert first["events"] + rest["events"] == got["events"]
    finally:
        server.stop()
