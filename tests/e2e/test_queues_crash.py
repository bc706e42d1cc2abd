"""kill -9 `celld run` while messages are being sent: every send acknowledged to the client
before the kill is delivered after a restart.

The "hold" queue of tests/projects/queues batches 100 messages or waits 60 s on the manual
clock, so most messages are still waiting at the kill; after the restart the clock moves
and every acknowledged message must reach the consumer, which records it in KV.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

PROJECT = PROJECTS / "queues"
T0 = 1_900_000_000_000


def _pump(url: str, thread: int, acked: list[str], stop: threading.Event) -> None:
    """Send one message after another until stopped or the server dies."""
    with httpx.Client(base_url=url, timeout=10) as client:
        n = 0
        while not stop.is_set():
            name = f"t{thread}-{n}"
            try:
                response = client.post("/send", params={"tag": name, "queue": "hold"})
            except httpx.TransportError:
                return
            if response.status_code == 200:
                acked.append(name)
            n += 1


def _delivered(server: CelldServer) -> set[str]:
    tags: set[str] = set()
    cursor = None
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = server.get("/delivered", params=params).json()
        tags.update(page["tags"])
        cursor = page["cursor"]
        if not cursor:
            return tags


def test_acknowledged_sends_survive_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(PROJECT, state, manual_clock=T0).start()
    acked: list[str] = []
    stop = threading.Event()
    workers = [threading.Thread(target=_pump, args=(server.url, t, acked, stop)) for t in range(4)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 30
    while len(acked) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill()  # SIGKILL, mid-sends
    stop.set()
    for worker in workers:
        worker.join(15)
    assert len(acked) >= 40, "the load never got going"

    server = CelldServer(PROJECT, state, manual_clock=T0).start()
    try:
        backlog = server.get("/metrics", params={"queue": "hold"}).json()["backlogCount"]
        assert backlog >= len(acked)  # every acknowledged send is stored (and maybe more)

        def all_delivered() -> bool:
            server.advance(60_000)
            return set(acked) <= _delivered(server)

        server.wait_for(all_delivered, timeout=60, interval=0.2)
        server.wait_for(
            lambda: server.get("/metrics", params={"queue": "hold"}).json()["backlogCount"] == 0
        )
    finally:
        server.stop()
