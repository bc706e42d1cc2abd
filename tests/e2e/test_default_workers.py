"""`celld run` without `--workers`: the README's first command (`celld run examples/signup`)
serves with one process per core, and a state folder holding instances from a run with one
process stays at one (instances cannot move between processes), saying so. The other e2e
tests pin `--workers 1` (tests/celld_server.py); these leave the number to celld."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx

from celld.cluster.default import cores
from tests.celld_server import CelldServer

SIGNUP = Path(__file__).resolve().parents[2] / "examples" / "signup"
PROCESS = re.compile(r'^celld_cluster_process\{index="(\d+)"\} 1$', re.MULTILINE)


def processes_seen(url: str, want: int, timeout: float = 60) -> set[int]:
    """The process indices `/metrics` answers from, each request on its own connection
    (so any process may take it), until `want` are seen or `timeout` passes."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        with httpx.Client(base_url=url, timeout=30) as client:
            metrics = client.get("/cdn-cgi/celld/metrics").text
        seen |= {int(index) for index in PROCESS.findall(metrics)}
    return seen


def test_the_readme_command_serves_with_one_process_per_core(tmp_path: Path) -> None:
    server = CelldServer(SIGNUP, tmp_path / "state", workers=None).start(timeout=90)
    try:
        n = cores()
        if n > 1:
            # (the parent says it once every process listens; /health may answer before)
            server.wait_for(lambda: f"{n} processes share the port" in server.log())
            assert processes_seen(server.url, n) == set(range(n))
        else:  # one core: one process, as before
            server.wait_for(lambda: "serving signup" in server.log())
            assert "processes share the port" not in server.log()
        signed = server.post("/signup", json={"email": "ada@example.com"})
        assert signed.status_code == 200, signed.text
        instance = signed.json()["id"]
        # as the README says: the instance waits (its sleep, then the confirmation)
        answer = server.wait_for(
            lambda: (a := server.get(f"/signup/{instance}").json())["status"] == "waiting" and a
        )
        assert answer == {"id": instance, "status": "waiting", "output": None}
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0, server.log()


def test_a_folder_with_instances_from_one_process_stays_at_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    one = CelldServer(SIGNUP, state).start(timeout=90)  # pinned: --workers 1
    try:
        signed = one.post("/signup", json={"email": "ada@example.com"})
        assert signed.status_code == 200, signed.text
        instance = signed.json()["id"]
    finally:
        one.stop()
    again = CelldServer(SIGNUP, state, workers=None).start(timeout=90)
    try:
        log = again.wait_for(lambda: "serving signup" in again.log() and again.log())
        assert "holds workflow instances from a run with one process" in log, log
        assert "--persist-to" in log and "processes share the port" not in log, log
        assert again.get(f"/signup/{instance}").json()["id"] == instance
        assert processes_seen(again.url, 2, timeout=2) == set()  # no cluster metrics at all
    finally:
        again.stop()
