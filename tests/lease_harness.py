"""Lease harness: two `celld run` nodes on one PostgreSQL, one of them stopped (SIGSTOP).

Every step of the workflow (tests/projects/lease) sends an outside recorder one effect
naming the node that sent it (`--var NODE:a` / `NODE:b`), the instance and step, when its
JS ran (`Date.now()`) and a fresh nonce, and returns the nonce; the instance's output is
every step's nonce. Two scenarios:

* ``lost``: node A runs 20 instances; it is stopped for three lease periods and more,
  until node B has taken every one of them over and sent effects for each; then it is
  continued. A must send nothing for the instances it lost: no effect from A whose JS ran
  after its lease ended (`at` after the stop), and none reaching the recorder after it
  was continued. Every instance completes once, with the nonces of the last execution
  the recorder saw of each step.
* ``commit``: node A is stopped while one of its commits is open in the database (its
  row is locked by its own transaction, caught by trying again until it is); node B must
  take A's instances over within two lease periods of the stop, without losing its own
  lease, while A stays stopped. Then A is continued and the same checks hold.

Short forms in CI (tests/e2e/test_nodes.py); long form, against a running PostgreSQL:

    python -m tests.lease_harness --store postgresql://celld@127.0.0.1:5432/postgres \\
        --scenario lost --runs 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.celld_server import CelldServer
from tests.e2e.counter import QuietHandler, serving
from tests.postgres_fixtures import create_database, drop_database

PROJECT = Path(__file__).resolve().parent / "projects" / "lease"
WORKFLOW = "RECORDED"


@dataclass(frozen=True)
class Effect:
    node: str
    instance: str
    step: int
    at_ms: int  # Date.now() when the step's JS ran, on the sending node
    nonce: str
    arrived: float  # monotonic, here, when the recorder got it


class Recorder:
    """An outside HTTP server that records every effect the workflow's steps send."""

    def __init__(self) -> None:
        self.url = ""
        self._effects: list[Effect] = []
        self._lock = threading.Lock()

    def record(self, body: dict[str, Any]) -> None:
        effect = Effect(
            str(body["node"]),
            str(body["instance"]),
            int(body["step"]),
            int(body["at"]),
            str(body["nonce"]),
            time.monotonic(),
        )
        with self._lock:
            self._effects.append(effect)

    @property
    def effects(self) -> list[Effect]:
        with self._lock:
            return list(self._effects)

    def reached(self, node: str, since: float = 0.0) -> set[str]:
        """Instances `node` sent an effect for that arrived after monotonic `since`."""
        return {e.instance for e in self.effects if e.node == node and e.arrived > since}


@contextmanager
def recorder_server() -> Iterator[Recorder]:
    recorder = Recorder()

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def handle(self) -> None:
            # a node killed (or its connection dropped) at the end: nothing to record
            with contextlib.suppress(ConnectionError):
                super().handle()

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            if len(body) < length:  # the sender died halfway (killed at the end)
                self.close_connection = True
                return
            recorder.record(json.loads(body))
            self.answer_ok()

    with serving(Handler) as url:
        recorder.url = url
        yield recorder


class Database:
    """The test's own look at the shared database (a session of its own, no transaction
    left open)."""

    def __init__(self, dsn: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._connection: asyncpg.Connection = self._loop.run_until_complete(asyncpg.connect(dsn))

    def fetch(self, sql: str, *args: Any) -> list[Any]:
        return list(self._loop.run_until_complete(self._connection.fetch(sql, *args)))

    def fetchval(self, sql: str, *args: Any) -> Any:
        return self._loop.run_until_complete(self._connection.fetchval(sql, *args))

    def row_locked(self, token: int) -> bool:
        """True if a transaction holds a lock on node `token`'s row that reaping (FOR
        UPDATE) would have to wait for: a commit of that node is open."""

        async def probe() -> bool:
            try:
                async with self._connection.transaction():
                    await self._connection.fetchval(
                        "SELECT token FROM celld_nodes WHERE token = $1 FOR UPDATE NOWAIT", token
                    )
            except asyncpg.LockNotAvailableError:
                return True
            return False

        return self._loop.run_until_complete(probe())

    def close(self) -> None:
        self._loop.run_until_complete(self._connection.close())
        self._loop.close()


@dataclass
class Report:
    scenario: str
    instances: int
    effects: int = 0
    #: effects from the stopped node whose JS ran after it was stopped (its lease ended)
    decided_after_lease: list[Effect] = field(default_factory=list)
    #: effects from the stopped node that reached the recorder after it was continued
    arrived_after_lease: list[Effect] = field(default_factory=list)
    #: seconds from the stop until the other node owned every unfinished instance
    takeover_s: float | None = None
    #: tries it took to stop the node with a commit open (scenario "commit")
    stop_tries: int = 0
    #: fetches of the stopped node dispatched before its lease ended whose bytes it held
    #: back once continued (celld/isolate/outbound.py)
    held_back: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        takeover = f", takeover {self.takeover_s:.2f} s" if self.takeover_s is not None else ""
        tries = f", caught in a commit on try {self.stop_tries}" if self.stop_tries else ""
        return (
            f"{self.scenario}: {self.instances} instances, {self.effects} effects, "
            f"{len(self.decided_after_lease)} decided and {len(self.arrived_after_lease)} "
            f"arrived after the lease ended, {self.held_back} held back at the socket"
            f"{takeover}{tries}, {len(self.problems)} problems"
        )


def wait_for(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what}: not so after {timeout} s")


class LeaseHarness:
    def __init__(self, folder: Path, dsn: str, recorder: Recorder, *, lease_ms: int) -> None:
        self.folder = folder
        self.dsn = dsn
        self.recorder = recorder
        self.lease_ms = lease_ms
        self.lease_s = lease_ms / 1000
        self.db = Database(dsn)
        self.nodes: dict[str, CelldServer] = {}
        self.stopped: str | None = None

    def start(self, name: str) -> CelldServer:
        node = CelldServer(
            PROJECT,
            self.folder / f"node-{name}",
            args=("--store", self.dsn, "--var", f"NODE:{name}"),
            env={"CELLD_NODE_LEASE_MS": str(self.lease_ms)},
        )
        node.log_path = self.folder / f"node-{name}-celld.log"
        self.nodes[name] = node.start()
        return node

    def pid(self, name: str) -> int:
        process = self.nodes[name].process
        assert process is not None
        return process.pid

    def token(self, name: str) -> int | None:
        """The node's current token (None while it holds no row)."""
        value = self.db.fetchval(
            "SELECT max(token) FROM celld_nodes WHERE name = $1",
            f"{socket.gethostname()}:{self.pid(name)}",
        )
        return int(value) if value is not None else None

    def stop(self, name: str) -> float:
        os.kill(self.pid(name), signal.SIGSTOP)
        self.stopped = name
        return time.monotonic()

    def cont(self, name: str) -> float:
        os.kill(self.pid(name), signal.SIGCONT)
        self.stopped = None
        return time.monotonic()

    def create(self, on: str, ids: list[str], steps: int, nap: int | None) -> None:
        params = {"recorder": self.recorder.url, "steps": steps, "nap": nap}
        response = self.nodes[on].post(
            "/create-batch", json=[{"id": i, "params": params} for i in ids]
        )
        response.raise_for_status()

    def statuses(self, via: str, ids: list[str]) -> dict[str, Any]:
        try:
            response = self.nodes[via].post("/statuses", json=ids)
            return dict(response.json()) if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return {}

    def owners(self, ids: list[str]) -> dict[str, int | None]:
        rows = self.db.fetch(
            "SELECT id, owner FROM instances WHERE id = ANY($1::text[]) "
            "AND (runnable = 1 OR next_wake IS NOT NULL)",
            ids,
        )
        return {r["id"]: r["owner"] for r in rows}

    def close(self) -> None:
        if self.stopped is not None:
            self.cont(self.stopped)
        for node in self.nodes.values():
            node.kill()
        self.db.close()

    # -- the checks both scenarios end with ----------------------------------------------------

    def finish(
        self,
        report: Report,
        ids: list[str],
        steps: int,
        *,
        stopped_at_wall: float,
        continued_at: float,
        continued_at_wall: float,
        timeout: float,
    ) -> Report:
        a, b = self.nodes["a"], self.nodes["b"]
        # A learns it was taken over: from then on nothing it loaded before can act.
        wait_for(lambda: "rejoined as node" in a.log(), timeout, "node a rejoined")
        statuses: dict[str, Any] = {}

        def complete() -> bool:
            nonlocal statuses
            statuses = self.statuses("b", ids)
            return len(statuses) == len(ids) and all(
                s.get("status") == "complete" for s in statuses.values()
            )

        try:
            wait_for(complete, timeout, "every instance complete", interval=0.2)
        except AssertionError as error:
            report.problems.append(f"{error}: {statuses}")
        effects = self.recorder.effects
        report.effects = len(effects)
        # A's JS cannot run while it is stopped: a turn after the stop ran after SIGCONT
        threshold_ms = 1000 * (stopped_at_wall + continued_at_wall) / 2
        report.decided_after_lease = [
            e for e in effects if e.node == "a" and e.instance in ids and e.at_ms >= threshold_ms
        ]
        report.arrived_after_lease = [
            e for e in effects if e.node == "a" and e.instance in ids and e.arrived > continued_at
        ]
        for effect in report.decided_after_lease:
            report.problems.append(f"node a sent an effect after its lease ended: {effect}")
        for effect in report.arrived_after_lease:
            report.problems.append(f"an effect of node a arrived after its lease ended: {effect}")
        last: dict[tuple[str, int], Effect] = {}
        for effect in sorted(effects, key=lambda e: e.arrived):
            last[(effect.instance, effect.step)] = effect
        for instance in ids:
            status = statuses.get(instance, {})
            if status.get("status") != "complete":
                continue
            expected = [last[(instance, i)].nonce if (instance, i) in last else None
                        for i in range(steps)]  # fmt: skip
            if status.get("output") != expected:
                report.problems.append(
                    f"{instance}: output {status.get('output')} is not what the last "
                    f"execution of each step sent the recorder ({expected})"
                )
        report.held_back = a.log().count("was not sent: this node's lease lapsed")
        if "lease lapsed" not in a.log():
            report.problems.append("node a never said its lease lapsed")
        if "lost its lease" in b.log():
            report.problems.append("node b lost its own lease")
        return report


def run_lost(
    dsn: str, *, lease_ms: int = 1500, instances: int = 20, steps: int = 40,
    nap: int = 100, timeout: float = 120,
) -> Report:  # fmt: skip
    """Scenario "lost" (see the module's docstring)."""
    ids = [f"lost{n:02}" for n in range(instances)]
    report = Report("lost", instances)
    with tempfile.TemporaryDirectory(prefix="celld-lease-") as folder, recorder_server() as rec:
        harness = LeaseHarness(Path(folder), dsn, rec, lease_ms=lease_ms)
        try:
            harness.start("a")
            harness.start("b")
            harness.create("a", ids, steps, nap)
            wait_for(lambda: rec.reached("a") >= set(ids), timeout, "node a runs every instance")
            stopped_at = harness.stop("a")
            stopped_at_wall = time.time()
            a_token = harness.token("a")
            b_token = harness.token("b")

            def taken_over() -> bool:
                owners = harness.owners(ids)
                return (
                    time.monotonic() - stopped_at >= 3 * harness.lease_s
                    and harness.token("a") != a_token
                    and all(owner == b_token for owner in owners.values())  # (unfinished)
                    and rec.reached("b") >= set(ids)
                )

            wait_for(taken_over, timeout, "node b took every instance over and runs them")
            continued_at_wall = time.time()
            continued_at = harness.cont("a")
            return harness.finish(
                report, ids, steps, stopped_at_wall=stopped_at_wall,
                continued_at=continued_at, continued_at_wall=continued_at_wall,
                timeout=timeout,
            )  # fmt: skip
        finally:
            harness.close()


def run_commit(
    dsn: str, *, lease_ms: int = 2000, instances: int = 20, steps: int = 80,
    timeout: float = 120, tries: int = 60,
) -> Report:  # fmt: skip
    """Scenario "commit" (see the module's docstring)."""
    ids = [f"commit{n:02}" for n in range(instances)]
    report = Report("commit", instances)
    with tempfile.TemporaryDirectory(prefix="celld-lease-") as folder, recorder_server() as rec:
        harness = LeaseHarness(Path(folder), dsn, rec, lease_ms=lease_ms)
        try:
            harness.start("a")
            harness.start("b")
            harness.create("a", ids, steps, None)
            wait_for(lambda: rec.reached("a") >= set(ids), timeout, "node a runs every instance")
            a_token = harness.token("a")
            b_token = harness.token("b")
            assert a_token is not None and b_token is not None
            while True:
                report.stop_tries += 1
                stopped_at = harness.stop("a")
                stopped_at_wall = time.time()
                # locked, and still locked a moment later (when A is surely stopped)
                if harness.db.row_locked(a_token):
                    time.sleep(0.2)
                    if harness.db.row_locked(a_token):
                        break  # stopped with a commit open
                if report.stop_tries >= tries:
                    raise AssertionError(f"node a was never caught in a commit ({tries} tries)")
                resumed = harness.cont("a")
                wait_for(
                    lambda since=resumed: rec.reached("a", since), timeout, "node a runs again"
                )

            def taken_over() -> bool:
                owners = harness.owners(ids)
                return harness.token("a") is None and all(o == b_token for o in owners.values())

            patience = min(timeout, max(30.0, 10 * harness.lease_s))
            wait_for(taken_over, patience, "node b took every instance of node a over")
            report.takeover_s = time.monotonic() - stopped_at
            if report.takeover_s > 2 * harness.lease_s:
                report.problems.append(
                    f"node b took over {report.takeover_s:.2f} s after node a stopped, more "
                    f"than two lease periods ({2 * harness.lease_s:.1f} s)"
                )
            if harness.token("b") != b_token:
                report.problems.append("node b lost its lease while node a was stopped")
            continued_at_wall = time.time()
            continued_at = harness.cont("a")
            return harness.finish(
                report, ids, steps, stopped_at_wall=stopped_at_wall,
                continued_at=continued_at, continued_at_wall=continued_at_wall,
                timeout=timeout,
            )  # fmt: skip
        finally:
            harness.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", required=True, help="postgresql://... (databases are made)")
    parser.add_argument("--scenario", choices=("lost", "commit"), default="lost")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--lease-ms", type=int, default=0, help="default: the scenario's")
    args = parser.parse_args()
    failed = 0
    for run in range(1, args.runs + 1):
        dsn = asyncio.run(create_database(args.store))
        try:
            kwargs = {"lease_ms": args.lease_ms} if args.lease_ms else {}
            scenario = run_lost if args.scenario == "lost" else run_commit
            report = scenario(dsn, **kwargs)
        finally:
            asyncio.run(drop_database(args.store, dsn))
        failed += bool(report.problems)
        print(f"run {run}: {report.summary()}", flush=True)
        for problem in report.problems[:5]:
            print(f"  {problem}", flush=True)
    print(f"{args.runs - failed} of {args.runs} runs passed")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
