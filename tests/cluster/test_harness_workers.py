"""The cluster harness (tests/harness_everything.py) on `celld run --workers 2`: a
project binding KV, R2, D1, a Durable Object, a queue and a Workflow, written
continuously by client threads while one child is SIGKILLed (the parent starts it
again), the other is SIGSTOPped with calls in flight and SIGCONTed, and the first, with
turns of objects it owns held in flight, is stopped until calls pile up on it and then
SIGKILLed: nothing acknowledged is lost, every acknowledged message is delivered, no
object has two live copies, every instance completes, and no effect left before the
step results it carried were durable."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from celld.cluster.bindings import object_key
from celld.cluster.placement import owner_of_key
from tests.celld_run import CelldRun
from tests.cluster.test_workers import pids, running
from tests.harness_everything import Load, check_turns, gate_server
from tests.recorder_harness import recorder_server

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "projects" / "everything"
#: writes acknowledged between two faults
BETWEEN = 20
#: how long a child stays stopped: longer than a node's lease on a shared store, so its
#: peers' calls to what it owns wait on it (there is no lease to take them over)
STOPPED_S = 4.0
#: how long a child hangs (stopped) before it is killed with the calls waiting on it
HUNG_S = 2.0
#: rounds of the three faults: 1 in CI; the long form sets CELLD_HARNESS_ROUNDS
ROUNDS = int(os.environ.get("CELLD_HARNESS_ROUNDS", "1"))
#: the project's name (which keys its objects' placement)
WORKER = "celld-everything-test"
#: turns held in flight on the hung child's objects when it is killed
HELD = 2


def _restarted(cluster: CelldRun, index: int, starts: int) -> int:
    """The pid of child `index` once the parent has started it more than `starts` times."""
    deadline = time.monotonic() + 120
    while len(pids(cluster)[index]) <= starts:
        assert cluster.process.poll() is None, cluster.log()
        assert time.monotonic() < deadline, f"process {index} not started again"
        time.sleep(0.05)
    return pids(cluster)[index][-1]


def owned_by(url: str, index: int, prefix: str) -> list[str]:
    """`HELD` object names whose objects child `index` of two owns."""
    names: list[str] = []
    with httpx.Client(timeout=60) as http:
        for n in range(100):
            object_id = http.get(f"{url}/do/{prefix}{n}/id").json()
            if owner_of_key(object_key(WORKER, "Counter", object_id), 2) == index:
                names.append(f"{prefix}{n}")
                if len(names) == HELD:
                    return names
    raise AssertionError(f"no {HELD} of 100 objects are owned by child {index}")


def test_every_kind_survives_a_killed_and_a_stopped_child(tmp_path: Path) -> None:
    held: list[str] = []
    with (
        recorder_server() as recorder,
        gate_server() as gate,
        running(PROJECT, tmp_path / "state") as cluster,
    ):
        load = Load(lambda: [cluster.url], recorder).start()
        try:
            load.wait_acked(BETWEEN)
            for round_ in range(ROUNDS):
                load.phase = "kill"
                starts = pids(cluster)[1]
                os.kill(starts[-1], signal.SIGKILL)
                _restarted(cluster, 1, len(starts))
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
                load.phase = "resumed"
                load.wait_acked(BETWEEN)
                load.phase = "hung"
                # A hung child killed: turns of its objects held at the gate, and the
                # calls waiting on it, are in flight when it dies.
                names = owned_by(cluster.url, 1, f"hold{round_}-")
                for name in names:
                    load.hold(cluster.url, name, gate)
                gate.wait_held(names)
                held += names
                starts = pids(cluster)[1]
                os.kill(starts[-1], signal.SIGSTOP)
                time.sleep(HUNG_S)  # the fault's length: calls pile up on it meanwhile
                os.kill(starts[-1], signal.SIGKILL)
                _restarted(cluster, 1, len(starts))
                gate.release(names)  # nothing may wait for them now: their process died
                load.phase = "after"
                load.wait_acked(BETWEEN)
        finally:
            load.stop()
        book = load.book
        counts = book.check([cluster.url], recorder)
        assert book.failed_in("calm", "after") == []
        # held in flight when their object's process died: none may be acknowledged
        lost = [f for f in book.failures if f.startswith("hung-") and ": hold " in f]
        assert len(lost) == len(held), (held, book.failures)
        assert all(book.turns[name] == [] for name in held), book.turns
        assert counts["instances"] > 0 and counts["turns"] > 0, counts
        assert len(pids(cluster)[0]) == 1  # stopped, never restarted
        assert len(pids(cluster)[1]) == 1 + 2 * ROUNDS
        assert counts["sent"] > 0, counts
        print(f"\nharness --workers 2: {counts}; failed during faults: {book.failures}")


def test_the_turn_check_sees_two_owners_and_lost_turns() -> None:
    """What the harness would see if an object had two live copies or lost a turn."""

    def turn(seq: int, life: str, call: int) -> dict[str, object]:
        return {"seq": seq, "life": life, "call": call, "node": "n", "kind": "inc"}

    one_owner = [turn(1, "a", 1), turn(2, "a", 2), turn(3, "b", 1)]  # a died, b took over
    check_turns(one_owner, [one_owner[0], one_owner[2]])
    for turns, acked, says in (
        ([turn(1, "a", 1), turn(2, "b", 1), turn(3, "a", 2)], [], "two live copies"),
        ([turn(1, "a", 1), turn(2, "a", 3)], [], "skipped a turn"),
        ([turn(1, "a", 1), turn(3, "a", 2)], [], "with a gap"),
        (one_owner, [turn(2, "b", 1)], "lost turn"),
        (one_owner, [one_owner[0], one_owner[0]], "acknowledged twice"),
    ):
        with pytest.raises(AssertionError, match=says):
            check_turns(turns, acked)
