"""What the instance event log (subscribe()) costs a step commit, with nobody reading it.

    python bench/log_cost.py [--instances 20] [--steps 2000] [--rounds 3]

Real engine machines (celld.engine.Machine) run trivial steps, each begun and done with
its first attempt between two commits (the usual step); every round of `--instances`
steps is one group commit into a real SQLite file (synchronous=FULL) through
`SqliteStore._commit` on the calling thread, so thread CPU covers everything. Three ways
are priced, interleaved:

* `none`: the same writes with no log at all (the floor);
* `rows`: one row per event, as celld wrote it before (four rows a step; the entries are
  derived as now and expanded outside the timing: before, deriving the four entries
  cost about as much as deriving the compact one does now);
* `packed`: what celld writes now (celld/store/logpack.py: one row per write, a step's
  four events as one compact entry).

Printed per step: CPU deriving the entries (`InstanceLog.entries`, on the event loop in
celld) and CPU committing (the writer thread in celld), and their sum over `none`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from celld.cells.instance_log import InstanceLog  # noqa: E402
from celld.engine import Machine  # noqa: E402
from celld.store.base import InstanceRef, Write  # noqa: E402
from celld.store.batch import Pending  # noqa: E402
from celld.store.logpack import expand_entries  # noqa: E402
from celld.store.sqlite import SqliteStore  # noqa: E402

T0 = 1_700_000_000_000
CONFIG = {"retries": {"limit": 5, "delay": 1000, "backoff": "exponential"}}


def price(mode: str, instances: int, steps: int) -> tuple[float, float]:
    """(derive us/step, commit us/step) for `mode`."""
    folder = Path(tempfile.mkdtemp(prefix="celld-logcost-"))
    store = SqliteStore(folder / "state.sqlite")
    connection = store._connect()
    machines, logs = [], []
    for i in range(instances):
        m = Machine.create("wf", f"i{i}", "{}", T0)
        m.start_run(T0)
        logs.append(InstanceLog(m))
        machines.append(m)
        changes = m.take_changes()
        log = tuple(logs[-1].entries(changes, T0))
        write = Write(InstanceRef("wf", f"i{i}"), changes, None, True, log=log)
        store._commit(connection, [Pending(writes=[write])])
    derive = commit = 0.0
    rounds = steps // instances
    for r in range(1, rounds + 1):
        now = T0 + r
        writes = []
        for i, m in enumerate(machines):
            m.step_do("step", r, None, CONFIG, now)
            m.attempt_succeeded(("do", "step", r), 1, str(r), now)  # type: ignore[arg-type]
            changes = m.take_changes()
            t = time.thread_time()
            log = () if mode == "none" else tuple(logs[i].entries(changes, now))
            derive += time.thread_time() - t
            writes.append(Write(InstanceRef("wf", f"i{i}"), changes, None, True, log=log))
            m.forget_finished()
        if mode == "rows":  # as rows of one event each (expanding them is not priced)
            rows = [(w.ref.workflow, w.ref.id, *e) for w in writes for e in expand_entries(w.log)]
            writes = [Write(w.ref, w.changes, w.next_wake, w.runnable) for w in writes]
        t = time.thread_time()
        if mode == "rows":
            connection.executemany(_ROW, rows)  # opens the transaction the commit ends
            store._commit(connection, [Pending(writes=writes)])
        else:
            store._commit(connection, [Pending(writes=writes)])
        commit += time.thread_time() - t
    connection.close()
    n = rounds * instances
    return derive / n * 1e6, commit / n * 1e6


_ROW = "INSERT INTO instance_log (workflow, instance_id, timestamp, type, body) VALUES (?,?,?,?,?)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=20, help="steps per commit")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"none": [], "rows": [], "packed": []}
    for _ in range(args.rounds):
        for mode in results:
            results[mode].append(price(mode, args.instances, args.steps))
    floor = min(d + c for d, c in results["none"])
    for mode, runs in results.items():
        best = min(runs, key=lambda dc: dc[0] + dc[1])
        print(
            f"{mode:7s} derive {best[0]:5.1f} us  commit {best[1]:5.1f} us  "
            f"log costs {best[0] + best[1] - floor:5.1f} us a step (best of {len(runs)})"
        )


if __name__ == "__main__":
    main()
