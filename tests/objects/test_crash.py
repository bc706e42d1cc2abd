"""kill -9 `celld run` while objects write: acknowledged writes survive, alarms fire."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx

from tests.celld_server import CelldServer
from tests.objects.harness import OBJECTS, START_MS

NAMES = [f"crash-{i}" for i in range(6)]


def _rpc_url(name: str, method: str, *args: object) -> str:
    return "/rpc?" + httpx.QueryParams(name=name, call=json.dumps([method, *args])).__str__()


def _pump(url: str, name: str, acked: list[int], stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            try:
                response = client.get(_rpc_url(name, "increment"))
            except httpx.TransportError:
                return
            if response.status_code == 200:
                acked.append(response.json()["value"])


def test_acknowledged_increments_survive_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(OBJECTS, state).start()
    acked: dict[str, list[int]] = {name: [] for name in NAMES}
    stop = threading.Event()
    workers = [
        threading.Thread(target=_pump, args=(server.url, name, acked[name], stop)) for name in NAMES
    ]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 30
    while sum(map(len, acked.values())) < 60 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill()
    stop.set()
    for worker in workers:
        worker.join(15)
    assert sum(map(len, acked.values())) >= 60, "the load never got going"

    server = CelldServer(OBJECTS, state).start()
    try:
        for name in NAMES:
            stored = server.get(_rpc_url(name, "get")).json()["value"]
            # Every acknowledged increment is there; at most one more (done, not yet answered).
            assert acked[name] == list(range(1, len(acked[name]) + 1))
            assert len(acked[name]) <= stored <= len(acked[name]) + 1, (name, stored)
    finally:
        server.stop()


def test_an_alarm_set_before_kill_9_fires_after_the_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(OBJECTS, state, manual_clock=START_MS).start()
    at = START_MS + 3_600_000
    assert server.get(_rpc_url("alarmed", "scheduleAt", at)).json()["value"] == at
    server.kill()

    server = CelldServer(OBJECTS, state, manual_clock=START_MS + 60_000).start()
    try:
        assert server.get(_rpc_url("alarmed", "alarmState")).json()["value"] == {
            "runs": [],
            "alarm": at,
        }
        server.advance(3_600_000)

        def fired() -> object:
            value = server.get(_rpc_url("alarmed", "alarmState")).json()["value"]
            return value if value["runs"] else None

        state_after = server.wait_for(fired)
        assert len(state_after["runs"]) == 1 and state_after["alarm"] is None
    finally:
        server.stop()


def test_alarms_killed_while_firing_fire_again(tmp_path: Path) -> None:
    """kill -9 while alarms fire: after the restart every alarm has run at least once and
    none is left pending."""
    state = tmp_path / "state"
    names = [f"firing-{i}" for i in range(10)]
    server = CelldServer(OBJECTS, state, manual_clock=START_MS).start()
    for name in names:
        server.get(_rpc_url(name, "scheduleAt", START_MS + 60_000))
    server.advance(61_000)
    time.sleep(0.05)  # some alarms are running, some not yet
    server.kill()

    server = CelldServer(OBJECTS, state, manual_clock=START_MS + 120_000).start()
    try:

        def settled() -> object:
            states = [server.get(_rpc_url(n, "alarmState")).json()["value"] for n in names]
            done = all(s["runs"] and s["alarm"] is None for s in states)
            return states if done else None

        states = server.wait_for(settled)
        assert all(len(s["runs"]) >= 1 for s in states)
    finally:
        server.stop()
