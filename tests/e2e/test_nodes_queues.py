"""Queues on two `celld run` nodes sharing one PostgreSQL: messages sent through either
node are consumed once, by the one node that holds the queue; that node killed with
SIGKILL while sends and batches are in flight, and the other node takes the queue over
and delivers every acknowledged message (at least once).

tests/projects/queues records each delivery in KV (in the shared database), one key per
message tag.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from pathlib import Path

import httpx

from tests.celld_server import CelldServer
from tests.cluster.test_queues_workers import wait_acked_beyond

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "queues"
LEASE_MS = 2000
CONSUMED = re.compile(r"queue (\S+): consumed on this node")


def _nodes(tmp_path: Path, dsn: str, count: int) -> list[CelldServer]:
    return [
        CelldServer(
            PROJECT,
            tmp_path / f"node{index}",
            args=("--store", dsn),
            env={"CELLD_NODE_LEASE_MS": str(LEASE_MS)},
        ).start()
        for index in range(count)
    ]


def _consumer_of(nodes: list[CelldServer], queue: str, timeout: float = 30) -> int:
    """The index of the node whose log says it consumes `queue` (exactly one)."""
    deadline = time.monotonic() + timeout
    while True:
        holders = [i for i, n in enumerate(nodes) if queue in CONSUMED.findall(n.log())]
        if holders:
            assert len(holders) == 1, holders
            return holders[0]
        assert time.monotonic() < deadline, "nobody consumes " + queue
        time.sleep(0.05)


def _delivered(node: CelldServer) -> dict[str, int]:
    """Each tag the consumer recorded, and how many deliveries it recorded for it."""
    tags: dict[str, int] = {}
    cursor = None
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = node.get("/delivered", params=params).json()
        for tag in page["tags"]:
            tags[tag] = len(node.get("/seen", params={"tag": tag}).json())
        cursor = page["cursor"]
        if not cursor:
            return tags


def _wait_delivered(node: CelldServer, tags: set[str], timeout: float = 60) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        seen = _delivered(node)
        if tags <= set(seen):
            return seen
        assert time.monotonic() < deadline, f"never delivered: {sorted(tags - set(seen))[:20]}"
        time.sleep(0.2)


def test_messages_sent_through_either_node_are_consumed_once(
    tmp_path: Path, postgres_dsn: str
) -> None:
    nodes = _nodes(tmp_path, postgres_dsn, 2)
    try:
        tags = set()
        for n in range(20):
            tag = f"m{n}"
            answer = nodes[n % 2].post("/send", params={"tag": tag, "queue": "jobs"})
            assert answer.status_code == 200, answer.text
            tags.add(tag)
        seen = _wait_delivered(nodes[0], tags)
        assert all(seen[tag] == 1 for tag in tags), seen
        _consumer_of(nodes, "jobs")
        # Retried twice, then moved to the dead letter queue (consumed by either node).
        assert nodes[1].post("/send", params={"tag": "bad", "mode": "throw"}).is_success
        deadline = time.monotonic() + 60
        while True:
            seen_bad = nodes[0].get("/seen", params={"tag": "bad"}).json()
            if [s["queue"] for s in seen_bad] == ["jobs", "jobs", "jobs", "dead"]:
                break
            assert time.monotonic() < deadline, seen_bad
            time.sleep(0.2)
        # A delay is honoured whichever node consumes: not delivered before it is due.
        assert nodes[1].post("/send", params={"tag": "later", "delay": "2"}).is_success
        _wait_delivered(nodes[0], {"later"})
        later = nodes[0].get("/seen", params={"tag": "later"}).json()
        assert len(later) == 1 and later[0]["at"] - later[0]["timestamp"] >= 2000, later
        for node in nodes:
            assert node.get("/metrics", params={"queue": "jobs"}).json()["backlogCount"] == 0
            assert "Traceback" not in node.log(), node.log()
    finally:
        for node in nodes:
            node.stop()


def _pump(url: str, acked: list[str], prefix: str, stop: threading.Event) -> None:
    n = 0
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.is_set():
            tag = f"{prefix}-{n}"
            n += 1
            try:
                answer = client.post("/send", params={"tag": tag, "queue": "jobs"})
            except httpx.TransportError:
                return  # this node was killed
            if answer.status_code == 200:
                acked.append(tag)


def test_a_killed_consumer_node_hands_its_queue_over(tmp_path: Path, postgres_dsn: str) -> None:
    nodes = _nodes(tmp_path, postgres_dsn, 2)
    try:
        acked: list[str] = []
        stop = threading.Event()
        pumps = [
            threading.Thread(target=_pump, args=(node.url, acked, f"n{i}", stop))
            for i, node in enumerate(nodes)
        ]
        for pump in pumps:
            pump.start()
        try:
            victim = _consumer_of(nodes, "jobs")
            survivor = nodes[1 - victim]
            deadline = time.monotonic() + 60
            while len(_delivered(survivor)) < 10:  # batches are being consumed
                assert time.monotonic() < deadline
                time.sleep(0.05)
            nodes[victim].kill()
            # sends go on through the survivor
            wait_acked_beyond(acked, len(acked) + 10, survivor.log)
        finally:
            stop.set()
            for pump in pumps:
                pump.join()
        seen = _wait_delivered(survivor, set(acked), timeout=90)
        assert "jobs" in CONSUMED.findall(survivor.log()), survivor.log()
        assert set(acked) <= set(seen) and len(acked) > 20
    finally:
        for node in nodes:
            node.stop()


def test_a_consumer_stopped_past_its_lease_loses_its_queue(
    tmp_path: Path, postgres_dsn: str
) -> None:
    nodes = _nodes(tmp_path, postgres_dsn, 2)
    stopped = None
    try:
        assert nodes[0].post("/send", params={"tag": "first"}).is_success
        _wait_delivered(nodes[1], {"first"})
        owner = _consumer_of(nodes, "jobs")
        stopped, survivor = nodes[owner], nodes[1 - owner]
        assert stopped.process is not None
        os.kill(stopped.process.pid, signal.SIGSTOP)
        # Sent while the owner is stopped: consumed once its lease runs out, by the other.
        tags = {f"s{n}" for n in range(10)}
        for tag in sorted(tags):
            assert survivor.post("/send", params={"tag": tag}).is_success
        _wait_delivered(survivor, tags, timeout=60)
        assert "jobs" in CONSUMED.findall(survivor.log()), survivor.log()
        os.kill(stopped.process.pid, signal.SIGCONT)
        # Back, it finds the queue taken and consumes no more; the survivor goes on.
        deadline = time.monotonic() + 30
        while "queue jobs: not consumed on this node any more" not in stopped.log():
            assert time.monotonic() < deadline, stopped.log()
            time.sleep(0.1)
        assert stopped.post("/send", params={"tag": "after"}).is_success
        assert _wait_delivered(survivor, {"after"})["after"] == 1
    finally:
        if stopped is not None and stopped.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped.process.pid, signal.SIGCONT)
        for node in nodes:
            node.stop()
