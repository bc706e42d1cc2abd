"""Queues on `celld run --workers 2`: real processes sharing one queue file, each queue
consumed by one process, the owner of a queue killed with SIGKILL while sends and
batches are in flight, and every acknowledged send delivered (at least once).

tests/projects/queues records each delivery in KV (shared by the processes), one key per
message tag, so the test sees how often each message reached a `queue()` handler.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx

from celld.cluster.placement import owner_of_key
from celld.cluster.queues import queue_key
from tests.celld_run import CelldRun
from tests.cluster.test_workers import pids

ROOT = Path(__file__).resolve().parents[2]
QUEUES = ROOT / "tests" / "projects" / "queues"


def fresh(url: str, method: str, path: str, **kwargs) -> httpx.Response:
    """One request on a new connection (so either process may take it)."""
    with httpx.Client(base_url=url, timeout=60) as client:
        return client.request(method, path, **kwargs)


def delivered(url: str) -> set[str]:
    tags: set[str] = set()
    cursor = None
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = fresh(url, "GET", "/delivered", params=params).json()
        tags.update(page["tags"])
        cursor = page["cursor"]
        if not cursor:
            return tags


def wait_delivered(url: str, tags: set[str], timeout: float = 90) -> set[str]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            seen = delivered(url)
        except httpx.TransportError:  # a process that was killed held the connection
            seen = set()
        if tags <= seen:
            return seen
        assert time.monotonic() < deadline, f"never delivered: {sorted(tags - seen)[:20]}"
        time.sleep(0.2)


def test_messages_sent_through_either_process_are_consumed_once(tmp_path: Path):
    run = CelldRun(QUEUES, tmp_path / "state", "--port", "0", "--workers", "2")
    try:
        url = run.ready(timeout=120)
        tags = {f"m{n}" for n in range(30)}
        for tag in sorted(tags):
            answer = fresh(url, "POST", "/send", params={"tag": tag, "queue": "jobs"})
            assert answer.status_code == 200, answer.text
        batch = [{"tag": f"b{n}", "mode": "ok"} for n in range(10)]
        assert fresh(url, "POST", "/batch", json=batch).status_code == 200
        tags |= {f"b{n}" for n in range(10)}
        wait_delivered(url, tags)
        for tag in sorted(tags):
            seen = fresh(url, "GET", "/seen", params={"tag": tag}).json()
            assert [s["queue"] for s in seen] == ["jobs"], (tag, seen)
            assert seen[0]["attempts"] == 1
        # A message that always throws: retried twice, then in the dead letter queue
        # (which may belong to the other process), delivered there once.
        assert fresh(url, "POST", "/send", params={"tag": "bad", "mode": "throw"}).is_success
        wait_delivered(url, {"bad"})
        deadline = time.monotonic() + 60
        while True:
            seen = fresh(url, "GET", "/seen", params={"tag": "bad"}).json()
            if [s["queue"] for s in seen] == ["jobs", "jobs", "jobs", "dead"]:
                break
            assert time.monotonic() < deadline, seen
            time.sleep(0.2)
        assert [s["attempts"] for s in seen] == [1, 2, 3, 1]
        # metrics() answers from either process: nothing is left in the queue.
        for _ in range(6):
            assert fresh(url, "GET", "/metrics").json()["backlogCount"] == 0
        # The operator's list: every queue once, from the process that consumes it.
        listed = fresh(url, "GET", "/cdn-cgi/celld/queues").json()["result"]
        assert [q["queue"] for q in listed] == ["dead", "hold", "jobs", "slow"]
        jobs = next(q for q in listed if q["queue"] == "jobs")
        assert jobs["consumer"] == "queues-test" and jobs["deadLettered"] == 1
        assert "Traceback" not in run.log(), run.log()
    finally:
        assert run.stop() == 0, run.log()


def wait_acked_beyond(acked: list[str], count: int, log: object, timeout: float = 60) -> None:
    """Until more than `count` sends were acknowledged (`log()` says why if never)."""
    deadline = time.monotonic() + timeout
    while len(acked) < count:
        assert time.monotonic() < deadline, log() if callable(log) else log
        time.sleep(0.05)


def _pump(url: str, thread: int, acked: list[str], stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        tag = f"t{thread}-{n}"
        n += 1
        try:
            answer = fresh(url, "POST", "/send", params={"tag": tag, "queue": "jobs"})
        except httpx.TransportError:  # the killed process held this connection
            continue
        if answer.status_code == 200:
            acked.append(tag)


def test_a_killed_owner_loses_no_acknowledged_message(tmp_path: Path):
    run = CelldRun(QUEUES, tmp_path / "state", "--port", "0", "--workers", "2")
    try:
        url = run.ready(timeout=120)
        owner = owner_of_key(queue_key("jobs"), 2)
        acked: list[str] = []
        stop = threading.Event()
        pumps = [threading.Thread(target=_pump, args=(url, t, acked, stop)) for t in range(3)]
        for pump in pumps:
            pump.start()
        try:
            deadline = time.monotonic() + 60
            while len(delivered(url)) < 10:  # batches are being consumed
                assert time.monotonic() < deadline, run.log()
                time.sleep(0.05)
            victim = pids(run)[owner][0]
            os.kill(victim, signal.SIGKILL)
            run.wait_for(rf"process {owner} exited .*: starting it again")
            during = len(acked)
            run.wait_for(rf"process {owner} started \(pid (?!{victim}\))\d+\)")
            # Sends went on while the owner was down (the other process took them).
            wait_acked_beyond(acked, during + 10, run.log)
        finally:
            stop.set()
            for pump in pumps:
                pump.join()
        assert len(acked) > 20
        wait_delivered(url, set(acked))
    finally:
        assert run.stop() == 0, run.log()
