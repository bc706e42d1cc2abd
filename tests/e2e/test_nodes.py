"""Two `celld run` nodes on one PostgreSQL: one is SIGKILLed in the middle of 20 running
workflows, more are created on the survivor meanwhile, and every instance finishes with
the right result (the checks of tests/nodes_harness.py and tests/crash_harness.py); one is
SIGSTOPped past its lease, or in the middle of a commit, and sends nothing for what the
other took over (tests/lease_harness.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from tests import pgcluster
from tests.celld_server import CelldServer
from tests.crash_harness import PROJECT
from tests.e2e.counter import counter_server
from tests.lease_harness import run_commit, run_lost
from tests.nodes_harness import run_nodes_harness
from tests.postgres_fixtures import create_database, drop_database

PROJECTS = Path(__file__).resolve().parent.parent / "projects"


async def test_a_node_killed_mid_run_loses_nothing(postgres_dsn: str) -> None:
    report = await asyncio.to_thread(
        run_nodes_harness,
        postgres_dsn,
        nodes=2,
        instances=20,
        late=10,
        kills=1,
        seed=5,
        timeout=120,
    )
    assert report.problems == []
    assert report.instances == 30
    assert report.executions >= 30 * 6  # a, b twice, c1, c2, d for every instance
    assert report.max_runs_per_attempt <= 2  # a callback ran again at most once (one kill)


def test_storage_bindings_with_a_shared_store_are_refused_at_start(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "celld", "run", str(PROJECTS / "storage"),
         "--persist-to", str(tmp_path), "--store", "postgresql://celld@127.0.0.1:1/none"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "cannot be combined with D1 (DB) bindings yet" in result.stderr


def test_a_database_crash_mid_run_is_waited_out(tmp_path: Path, own_cluster: Path) -> None:
    """PostgreSQL crashes (immediate stop) while 20 workflows run on two nodes and comes back
    a few seconds later: nothing fails, every instance completes, and the instances created
    and events sent before the crash are all there."""
    folder = own_cluster
    nodes: list[CelldServer] = []
    try:
        dsn = (folder / "dsn").read_text()
        env = {"CELLD_NODE_LEASE_MS": "2000"}
        for index in range(2):
            node = CelldServer(PROJECT, tmp_path / f"node{index}", args=("--store", dsn), env=env)
            nodes.append(node.start())
        ids = [f"r{i}" for i in range(20)]
        with counter_server() as counter:
            for n, start in enumerate(range(0, 20, 10)):
                chunk = [
                    {"id": i, "params": {"upstream": counter.url}} for i in ids[start : start + 10]
                ]
                nodes[n].post(
                    "/create-batch", params={"wf": "HARNESS"}, json=chunk
                ).raise_for_status()
            time.sleep(0.5)
            pgcluster.stop(folder, "immediate")
            time.sleep(3)  # longer than the lease: both nodes' leases run out meanwhile
            pgcluster.restart(folder)
            for i, instance in enumerate(ids):  # through either node, whoever owns it
                node = nodes[i % 2]
                send = partial(
                    node.post,
                    "/event",
                    params={"id": instance, "type": "go", "wf": "HARNESS"},
                    json={"for": instance},
                )
                node.wait_for(lambda send=send: send().status_code == 200, timeout=90)

            def all_complete() -> bool:
                statuses = nodes[0].post("/statuses", params={"wf": "HARNESS"}, json=ids).json()
                return all(s.get("status") == "complete" for s in statuses.values())

            nodes[0].wait_for(all_complete, timeout=60, interval=0.2)
            statuses = nodes[1].post("/statuses", params={"wf": "HARNESS"}, json=ids).json()
            for instance in ids:
                assert statuses[instance]["output"]["event"] == {"for": instance}
            assert "the store is failing" in nodes[0].log() + nodes[1].log()
    finally:
        for node in nodes:
            node.kill()


def test_any_node_operates_any_instance(tmp_path: Path, postgres_server: str) -> None:
    """Lifecycle operations, events and status reads sent to the node that does not own an
    instance are done by its owner (forwarded through the database)."""
    dsn = asyncio.run(create_database(postgres_server))
    nodes: list[CelldServer] = []
    try:
        for index in range(2):
            node = CelldServer(PROJECT, tmp_path / f"node{index}", args=("--store", dsn))
            nodes.append(node.start())
        owner, other = nodes
        with counter_server() as counter:
            owner.post(
                "/create", params={"wf": "HARNESS", "id": "x"}, json={"upstream": counter.url}
            ).raise_for_status()

            def status(node: CelldServer) -> str:
                response = node.post("/status", params={"wf": "HARNESS", "id": "x"})
                return str(response.json().get("status"))

            def op(name: str, **kwargs: object) -> None:
                response = other.post(f"/{name}", params={"wf": "HARNESS", "id": "x"}, **kwargs)
                assert response.status_code == 200, response.text

            other.wait_for(lambda: status(other) == "waiting", timeout=90)
            op("pause")
            assert status(owner) == "paused" and status(other) == "paused"
            op("resume")
            other.wait_for(lambda: status(other) == "waiting", timeout=90)
            op("terminate")
            assert status(owner) == "terminated"
            for again in ("pause", "terminate", "resume"):  # as the owner answers them
                here = owner.post(f"/{again}", params={"wf": "HARNESS", "id": "x"})
                there = other.post(f"/{again}", params={"wf": "HARNESS", "id": "x"})
                assert (there.status_code, there.json()) == (here.status_code, here.json())
            op("restart")
            other.wait_for(lambda: status(other) == "waiting", timeout=90)
            response = other.post(
                "/event", params={"wf": "HARNESS", "id": "x", "type": "go"}, json={"via": "other"}
            )
            assert response.status_code == 200, response.text
            other.wait_for(lambda: status(other) == "complete", timeout=90)
            assert "node 0" not in owner.log()  # never forwarded to a node that does not exist
    finally:
        for node in nodes:
            node.kill()
        asyncio.run(drop_database(postgres_server, dsn))


async def test_a_node_stopped_past_its_lease_sends_nothing_for_what_it_lost(
    postgres_dsn: str,
) -> None:
    """Node a is stopped (SIGSTOP) for three lease periods while its 20 instances call an
    outside recorder, node b takes them over, a is continued: a sends nothing more for
    them, and each completes once with the values the recorder saw last."""
    report = await asyncio.to_thread(run_lost, postgres_dsn, lease_ms=1500, instances=20)
    assert report.problems == []
    assert report.decided_after_lease == [] and report.arrived_after_lease == []
    assert report.effects >= 20 * 40


async def test_a_node_stopped_in_a_commit_cannot_stop_the_other(postgres_dsn: str) -> None:
    """Node a is stopped with one of its commits open in the database (its row locked):
    node b takes its instances over within two lease periods, without losing its own
    lease; a, continued, sends nothing for them."""
    report = await asyncio.to_thread(run_commit, postgres_dsn, lease_ms=2000, instances=20)
    assert report.problems == []
    assert report.takeover_s is not None and report.takeover_s <= 2 * 2.0
    assert report.decided_after_lease == [] and report.arrived_after_lease == []
