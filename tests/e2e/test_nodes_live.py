"""Two `celld run` nodes on one PostgreSQL: `subscribe()` through the node that does not
own an instance is woken by the owner's commits (LISTEN/NOTIFY), and a cron schedule
that fires on both nodes starts one instance per tick."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from celld.server.explorer_shape import DETAILS_HEADER
from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "nodes-live"
#: Less than the 20 s a subscriber waits before it reads the log again on its own: an
#: event that arrives within it was delivered by the wake-up, not by that re-read.
ARRIVAL_TIMEOUT_S = 15.0


def _nodes(tmp_path: Path, dsn: str, **options: Any) -> list[CelldServer]:
    nodes: list[CelldServer] = []
    for index in range(2):
        node = CelldServer(PROJECT, tmp_path / f"node{index}", args=("--store", dsn), **options)
        nodes.append(node.start())
    return nodes


def test_subscribe_through_another_node_sees_new_events(tmp_path: Path, postgres_dsn: str) -> None:
    """The instance runs on node a; node b streams its events to a subscriber: each event
    committed after the subscriber started waiting reaches it (the latency from the
    commit's timestamp to the line's arrival is printed, not asserted)."""
    owner, other = _nodes(tmp_path, postgres_dsn)
    try:
        script = [
            {"do": "a"},
            {"wait": "go", "type": "go"},
            {"do": "b"},
            {"sleep": "nap", "duration": 300},
            {"do": "c"},
            {"sleep": "nap 2", "duration": 300},
            {"do": "d"},
        ]
        owner.post("/create", params={"id": "x"}, json={"ops": script}).raise_for_status()
        owner.wait_for(
            lambda: owner.post("/status", params={"id": "x"}).json().get("status") == "waiting",
            timeout=60,
        )
        latencies: list[tuple[str, float]] = []
        timeout = httpx.Timeout(10.0, read=ARRIVAL_TIMEOUT_S)
        with httpx.stream("GET", f"{other.url}/watch", params={"id": "x"}, timeout=timeout) as got:
            assert got.status_code == 200
            lines = got.iter_lines()
            for line in lines:  # the history, up to the wait for "go"
                event = json.loads(line)
                assert "error" not in event and "done" not in event, event
                if event["type"] == "wait_started":
                    break
            sent_at = time.time() * 1000
            sent = owner.post("/event", params={"id": "x", "type": "go"}, json={"n": 1})
            assert sent.status_code == 200, sent.text
            seen: list[str] = []
            for line in lines:  # each one live: committed by node a after the wait began
                arrived = time.time() * 1000
                event = json.loads(line)
                assert "error" not in event, event
                if event.get("done"):
                    break
                seen.append(f"{event['type']} {event.get('stepName') or ''}".strip())
                if event["timestamp"] >= sent_at:  # (not the history read before)
                    latencies.append((seen[-1], arrived - event["timestamp"]))
        assert seen[-1] == "workflow_completed", seen
        for name in ("b", "c", "d"):
            assert f"step_completed {name}-1" in seen, seen
        worst = max(ms for _, ms in latencies)
        print(f"\nsubscribe() on the other node: {len(latencies)} live events, latency "
              f"(commit timestamp to arrival) median "
              f"{sorted(ms for _, ms in latencies)[len(latencies) // 2]:.1f} ms, worst "
              f"{worst:.1f} ms")  # fmt: skip
        for kind, ms in latencies:
            print(f"  {kind}: {ms:.1f} ms")
    finally:
        owner.kill()
        other.kill()


#: A minute boundary and a second: both nodes' manual clocks start here.
T0 = 1_900_000_020_000 + 1_000
EVERY_MINUTE = "* * * * *"


def _schedule(node: CelldServer) -> dict[str, Any]:
    response = node.get(
        "/cdn-cgi/local/explorer/api/workflows/cron-workflow", headers={DETAILS_HEADER: "1"}
    )
    response.raise_for_status()
    return dict(response.json()["result"])


def test_a_cron_tick_starts_one_instance_across_nodes(tmp_path: Path, postgres_dsn: str) -> None:
    """Both nodes' schedulers fire every tick (their manual clocks are moved together); the
    tick's instance id is fixed, so the database keeps one instance per tick."""
    nodes = _nodes(tmp_path, postgres_dsn, manual_clock=T0)
    try:
        for tick in (T0 - 1_000 + 60_000, T0 - 1_000 + 120_000):
            before = [_schedule(node)["schedules"][0]["lastTick"] for node in nodes]
            for node in nodes:
                moved = node.post("/cdn-cgi/celld/clock", params={"advance": 60_000}).json()
                assert moved["scope"] == "node" and "this node's clock only" in moved["note"]
            for node, last in zip(nodes, before, strict=True):  # each handled the tick
                node.wait_for(
                    lambda node=node, last=last: (
                        _schedule(node)["schedules"][0]["lastTick"] != last
                    ),
                    timeout=60,
                )
            instance_id = f"{EVERY_MINUTE}-{tick}"
            for node in nodes:
                view = node.post("/status", params={"wf": "CRON", "id": instance_id})
                assert view.status_code == 200, view.text
        counts = _schedule(nodes[1])["instances"]
        assert sum(counts.values()) == 2, counts
        logs = nodes[0].log() + nodes[1].log()
        assert logs.count("exists already") == 2, logs[-3000:]
    finally:
        for node in nodes:
            node.kill()
