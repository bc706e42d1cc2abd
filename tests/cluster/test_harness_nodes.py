"""The cluster harness (tests/harness_everything.py) on three `celld run` nodes sharing
one PostgreSQL: a project binding KV, R2, D1, a Durable Object, a queue and a Workflow,
written continuously through every live node while the node owning objects and the D1
database hangs and is SIGKILLed with turns of its objects held in flight (sent to it and
forwarded to it by another node), another is SIGSTOPped past its lease (its objects
move to the third) and SIGCONTed, and the killed one is started again. Nothing
acknowledged is lost, every acknowledged message is delivered, no object has two live
owners, every instance completes, and no effect left before the step results it carried
were durable."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from tests.celld_server import CelldServer
from tests.harness_everything import Load, gate_server
from tests.recorder_harness import recorder_server

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "projects" / "everything"
LEASE_MS = 2000
#: writes acknowledged between two faults
BETWEEN = 20
#: how long the first victim hangs (stopped, within its lease) before it is killed
HUNG_S = 1.0
#: objects placed on the first victim whose turns are held in flight when it dies
HELD = ["h0", "h1"]


def _node(tmp_path: Path, dsn: str, index: int) -> CelldServer:
    server = CelldServer(
        PROJECT,
        tmp_path / f"node{index}",
        args=("--store", dsn, "--var", f"NODE:node{index}"),
        env={"CELLD_NODE_LEASE_MS": str(LEASE_MS)},
    )
    return server.start(timeout=120)


def test_every_kind_survives_a_killed_and_a_stopped_node(tmp_path: Path, postgres_dsn: str) -> None:
    nodes = [_node(tmp_path, postgres_dsn, index) for index in range(3)]
    live = [node.url for node in nodes]
    lock = threading.Lock()

    def urls() -> list[str]:
        with lock:
            return list(live)

    def leave(node: CelldServer) -> None:
        with lock:
            live.remove(node.url)

    try:
        with recorder_server() as recorder, gate_server() as gate:
            # objects and the D1 database placed on node0, the first victim
            for name in ("c0", *HELD):
                nodes[0].post(f"/do/{name}/inc").raise_for_status()
            nodes[0].client.put("/d1/first").raise_for_status()  # type: ignore[union-attr]
            load = Load(urls, recorder, threads=5).start()
            load.book.d1.add("first")
            try:
                load.wait_acked(BETWEEN)
                load.phase = "kill"
                # turns of node0's objects held in flight, one sent to node0 and one
                # forwarded to it by node1, before it hangs (calls sent to it and
                # forwarded to its objects and database pile up) and dies
                load.hold(nodes[0].url, HELD[0], gate)
                load.hold(nodes[1].url, HELD[1], gate)
                gate.wait_held(HELD)
                assert nodes[0].process is not None
                os.killpg(nodes[0].process.pid, signal.SIGSTOP)
                time.sleep(HUNG_S)  # the fault's length: calls pile up on it meanwhile
                nodes[0].kill()
                leave(nodes[0])
                gate.release(HELD)  # nothing may wait for them now: their node died
                load.wait_acked(BETWEEN)
                load.phase = "stop"
                stopped = nodes[1]
                assert stopped.process is not None
                leave(stopped)  # calls already sent to it wait in its socket
                os.killpg(stopped.process.pid, signal.SIGSTOP)
                until = time.monotonic() + 3 * LEASE_MS / 1000
                try:
                    # its objects and database move to node2, which goes on
                    load.wait_acked(BETWEEN // 2)
                    # the fault's length: past the lease whatever the writes did
                    time.sleep(max(0.0, until - time.monotonic()))
                finally:
                    os.killpg(stopped.process.pid, signal.SIGCONT)
                nodes[0] = _node(tmp_path, postgres_dsn, 0)  # a supervisor brings it back
                with lock:
                    live.extend([stopped.url, nodes[0].url])
                load.phase = "after"
                load.wait_acked(BETWEEN)
            finally:
                load.stop()
            book = load.book
            counts = book.check([node.url for node in nodes], recorder)
        assert book.failed_in("calm", "after") == []
        # held in flight when their object's node died: none may be acknowledged
        lost = [f for f in book.failures if f.startswith("kill-") and ": hold " in f]
        assert len(lost) == len(HELD), book.failures
        assert all(book.turns[name] == [] for name in HELD), book.turns
        assert counts["sent"] > 0, counts
        moved = [t for t in book.turns["c0"] if t["node"] != "node0"]
        assert moved, "c0 never moved off the killed node"
        print(f"\nharness 3 nodes: {counts}; failed during faults: {book.failures}")
    finally:
        for node in nodes:
            if node.process is not None and node.process.poll() is None:
                os.killpg(node.process.pid, signal.SIGCONT)
            node.stop()
