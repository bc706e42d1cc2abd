"""The cluster harness (tests/harness_everything.py) on `celld run --workers 2`: a
project binding KV, R2, D1, a Durable Object and a Workflow, written continuously by
client threads while one child is SIGKILLed (the parent starts it again) and then the
other is SIGSTOPped with calls in flight and SIGCONTed: nothing acknowledged is lost, no
object has two live copies, every instance completes, and no effect left before the
step results it carried were durable."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.cluster.test_workers import pids, running
from tests.harness_everything import Load
from tests.recorder_harness import recorder_server

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "projects" / "everything"
#: writes acknowledged between two faults
BETWEEN = 30
#: how long a child stays stopped: longer than a node's lease on a shared store, so its
#: peers' calls to what it owns wait on it (there is no lease to take them over)
STOPPED_S = 4.0


def test_every_kind_survives_a_killed_and_a_stopped_child(tmp_path: Path) -> None:
    with recorder_server() as recorder, running(PROJECT, tmp_path / "state") as cluster:
        load = Load(lambda: [cluster.url], recorder).start()
        try:
            load.wait_acked(BETWEEN)
            load.phase = "kill"
            victim = pids(cluster)[1][-1]
            os.kill(victim, signal.SIGKILL)
            cluster.wait_for(r"process 1 exited .*: starting it again")
            cluster.wait_for(rf"process 1 started \(pid (?!{victim}\))\d+\)")
            load.wait_acked(BETWEEN)
            load.phase = "stop"
            stopped = pids(cluster)[0][-1]
            os.kill(stopped, signal.SIGSTOP)
            try:
                # the other child goes on answering what it owns meanwhile
                load.wait_acked(1)
                time.sleep(STOPPED_S)  # the fault's length, not a wait for an outcome
            finally:
                os.kill(stopped, signal.SIGCONT)
            load.phase = "after"
            load.wait_acked(BETWEEN)
        finally:
            load.stop()
        book = load.book
        counts = book.check([cluster.url], recorder)
        assert book.failed_in("calm", "after") == []
        assert counts["instances"] > 0 and counts["turns"] > 0, counts
        assert pids(cluster)[0] == [stopped]  # stopped, never restarted
        print(f"\nharness --workers 2: {counts}; failed during faults: {book.failures}")
