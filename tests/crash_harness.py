"""Crash harness: SIGKILL `celld run` at random moments under load and check nothing is lost.

It starts `celld run` on the durable test project, creates many HarnessWorkflow
instances (steps, a failing first attempt with a retry, a sleep, parallel steps, an
event wait), sends each its event at a random moment, and kills the server with
SIGKILL several times, restarting it on the same state folder each time. An outside
HTTP server (tests/e2e/counter.py) counts every step callback execution, and keeps every
effect that carried step results: each callback's report and a witness the workflow sends
right after a step resolves, outside any step, carry the results the run had seen. At
the end:

* every instance is complete with the output its code implies;
* no effect carried a value the journal later contradicts: every result an effect
  carried is the one the instance's output holds (a result JS has seen is durable before
  anything it does next leaves celld; one that was lost would have run again with
  another value);
* every recorded step result is a value one of the step's executions reported;
* every event whose sendEvent was acknowledged was delivered;
* each (step, attempt) callback ran at most once more per crash than without crashes,
  where a crash is a SIGKILL or a time the instance was dropped from memory because its
  store failed.

Which execution of a step ran last cannot be read from the counter: it records requests
as they arrive, and a report can arrive seconds after a later execution's (a run dropped
after a failed commit still sends the report of the attempt it had started, and under
load that request can wait in a connect retry). An execution that ran after its step's
result was recorded and acknowledged shows up instead as an effect that carried the
acknowledged result and is contradicted by the output.

With `--disk-full N` the harness also fills the state's disk for N random windows of up
to a few seconds (tests/disks.py; each window a full disk of one kind or the other: one
that overwrites in place, or a copy-on-write one): a full disk must never fail an
instance.

Short form in CI (tests/e2e/test_crash_harness.py); long form:

    python -m tests.crash_harness --instances 500 --kills 8
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import threading
import time
from collections import Counter as Tally
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.celld_server import CelldServer
from tests.disks import FullableDisk
from tests.e2e.counter import Counter, counter_server

PROJECT = Path(__file__).resolve().parent / "projects" / "durable"
STEPS = ("a", "b", "c1", "c2", "d")


@dataclass
class Report:
    instances: int
    kills: int
    executions: int
    max_runs_per_attempt: int
    problems: list[str] = field(default_factory=list)
    dropped: int = 0  # instances dropped from memory after store failures (and reloaded)
    witnesses: int = 0  # effects that carried step results, all checked against the journal

    def exit_with_summary(self, prefix: str, started: float) -> None:
        """Print the figures and every problem; exit 1 if there was one (the harnesses'
        command line)."""
        print(
            f"{prefix}{self.instances} instances, {self.kills} SIGKILLs, "
            f"{self.executions} step executions, "
            f"{self.witnesses} effects carrying results checked, "
            f"at most {self.max_runs_per_attempt} runs of one (step, attempt), "
            f"{self.dropped} drops after store failures, "
            f"{time.monotonic() - started:.1f} s"
        )
        for problem in self.problems:
            print("PROBLEM:", problem)
        raise SystemExit(1 if self.problems else 0)


class Harness:
    def __init__(
        self,
        state: Path,
        instances: int,
        kills: int,
        seed: int,
        disk_full: int = 0,
        store: str | None = None,
        disk: FullableDisk | None = None,
    ) -> None:
        """`disk`: the disk `state` lives on, which `disk_full` windows fill."""
        if disk_full and disk is None:
            raise ValueError("disk_full windows need the disk the state lives on")
        self.state = state
        self.disk = disk
        self.store = store
        self.ids = [f"h{i}" for i in range(instances)]
        self.kills = kills
        self.disk_full = disk_full
        self.log_path = state.parent / "harness-celld.log"
        self.random = random.Random(seed)
        self.server: CelldServer | None = None
        self.acked: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # -- server ----------------------------------------------------------------------

    def start(self) -> CelldServer:
        args = ("--store", self.store) if self.store else ()
        env = self.disk.env if self.disk is not None else None
        server = CelldServer(PROJECT, self.state, args=args, env=env)
        server.log_path = self.log_path
        server.start()
        self.server = server
        return server

    def url(self) -> str | None:
        server = self.server
        return server.url if server is not None else None

    # -- events, sent from a thread while the server dies and comes back ---------------

    def send_events(self) -> None:
        pending = list(self.ids)
        self.random.shuffle(pending)
        # One payload per instance: a send that got no answer may still have been
        # committed, so its retry must carry the same event.
        payloads = {i: {"for": i, "n": self.random.randrange(1_000_000)} for i in self.ids}
        while pending and not self._stop.is_set():
            instance = pending[0]
            url = self.url()
            payload = payloads[instance]
            try:
                response = httpx.post(
                    f"{url}/event",
                    params={"id": instance, "type": "go", "wf": "HARNESS"},
                    json=payload,
                    timeout=10,
                )
            except httpx.HTTPError:
                time.sleep(0.05)  # the server is down: try again once it is back
                continue
            if response.status_code == 200:
                with self._lock:
                    self.acked[instance] = payload
                pending.pop(0)
            elif "instance.cannot_send_event" in response.text:
                # an earlier send that got no answer landed and the instance has finished
                # since: sendEvent refuses events to finished instances
                pending.pop(0)
            time.sleep(self.random.uniform(0, 0.02))

    # -- the run -----------------------------------------------------------------------

    def run(self, counter: Counter, timeout: float) -> Report:
        server = self.start()
        for start in range(0, len(self.ids), 100):
            chunk = [
                {"id": i, "params": {"upstream": counter.url}}
                for i in self.ids[start : start + 100]
            ]
            response = server.post("/create-batch", params={"wf": "HARNESS"}, json=chunk)
            response.raise_for_status()
        sender = threading.Thread(target=self.send_events, daemon=True)
        sender.start()
        faults = ["kill"] * self.kills + ["disk full"] * self.disk_full
        self.random.shuffle(faults)
        for fault in faults:
            time.sleep(self.random.uniform(0.3, 2.0))
            if fault == "kill":
                server.kill()
                server = self.start()
            else:
                assert self.disk is not None
                with self.disk.full(copy_on_write=self.random.random() < 0.5):
                    time.sleep(self.random.uniform(0.5, 3.0))
        sender.join(timeout)
        self._stop.set()
        deadline = time.monotonic() + timeout
        statuses: dict[str, Any] = {}
        while time.monotonic() < deadline:
            statuses = server.post("/statuses", params={"wf": "HARNESS"}, json=self.ids).json()
            if all(s.get("status") == "complete" for s in statuses.values()):
                break
            time.sleep(0.2)
        server.stop()
        return self.check(statuses, counter)

    def log(self) -> str:
        """What every celld process of the run logged."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def drops(self) -> Tally[str]:
        """Times each instance was dropped from memory after a store failure (log)."""
        return Tally(re.findall(r"harness-workflow/(h\d+): dropped from memory", self.log()))

    def check(self, statuses: dict[str, Any], counter: Counter) -> Report:
        problems: list[str] = []
        drops = self.drops()
        runs = Tally(step for step, _ in counter.hits)
        reported: dict[str, set[str]] = {}
        for step, value in counter.hits:
            reported.setdefault(step.split("#", 1)[0], set()).add(value)
        journals: dict[str, dict[str, str]] = {}
        for instance in self.ids:
            status = statuses.get(instance, {})
            if status.get("status") != "complete":
                problems.append(f"{instance}: not complete: {status}")
                continue
            output = status["output"]
            recorded = {
                "a": output["a"],
                "b": output["b"],
                "c1": output["c"][0],
                "c2": output["c"][1],
                "d": output["d"],
            }
            journals[instance] = recorded
            for step in STEPS:
                if recorded[step] not in reported.get(f"{instance}/{step}", set()):
                    problems.append(
                        f"{instance}: step {step} returned {recorded[step]!r}, which no "
                        "execution of it reported"
                    )
            if output["event"] != self.acked.get(instance):
                problems.append(
                    f"{instance}: event {output['event']!r} "
                    f"but acknowledged {self.acked.get(instance)!r}"
                )
            if runs[f"{instance}/b#1"] < 1 or runs[f"{instance}/b#2"] < 1:
                problems.append(f"{instance}: step b did not fail once and then succeed")
        problems += contradicted(counter.witnesses, journals)
        if self.disk_full and "database or disk is full" not in self.log():
            problems.append("no full-disk window made a commit fail: the fault did not act")
        worst = max(runs.values(), default=0)
        over = [key for key, n in runs.items() if n > 1 + self.kills + drops[key.split("/", 1)[0]]]
        if over:
            problems.append(f"callbacks ran more than once per crash: {over[:5]}")
        report = Report(len(self.ids), self.kills, len(counter.hits), worst, problems)
        report.dropped = sum(drops.values())
        report.witnesses = len(counter.witnesses)
        return report


def contradicted(
    witnesses: list[tuple[str, dict[str, str]]], journals: dict[str, dict[str, str]]
) -> list[str]:
    """Every effect (sent by `sender`, "<instance>/...") that carried a step result other
    than the one the instance's journal ended with: a result acted on outside celld and
    then lost."""
    problems = []
    for sender, seen in witnesses:
        journal = journals.get(sender.split("/", 1)[0])
        if journal is None:
            continue  # not complete: reported as such
        for step, value in sorted(seen.items()):
            if journal.get(step) != value:
                problems.append(
                    f"{sender} carried {step} = {value!r}, the journal says {journal.get(step)!r}"
                )
    return problems


def run_harness(
    instances: int,
    kills: int,
    seed: int = 1,
    timeout: float = 120,
    disk_full: int = 0,
    store: str | None = None,
) -> Report:
    """Raises DiskFaultUnavailable when `disk_full` is asked for on a machine that cannot
    build the full-disk shim (tests/disks.py)."""
    with (
        tempfile.TemporaryDirectory(prefix="celld-harness-") as folder,
        counter_server() as counter,
    ):
        if not disk_full:
            harness = Harness(Path(folder) / "state", instances, kills, seed, store=store)
            return harness.run(counter, timeout)
        disk = FullableDisk(Path(folder) / "disk", Path(folder) / "shim")
        harness = Harness(disk.folder / "state", instances, kills, seed, disk_full, disk=disk)
        harness.log_path = Path(folder) / "harness-celld.log"
        return harness.run(counter, timeout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--disk-full", type=int, default=0, help="windows of a full disk")
    parser.add_argument("--store", help="postgresql://... (default: SQLite under the state)")
    args = parser.parse_args()
    started = time.monotonic()
    report = run_harness(
        args.instances, args.kills, args.seed, args.timeout, args.disk_full, args.store
    )
    report.exit_with_summary("", started)


if __name__ == "__main__":
    main()
