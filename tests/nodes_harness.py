"""Multi-node harness: several `celld run` nodes on one PostgreSQL, SIGKILLed at random.

It starts N nodes of the durable test project on one database (each its own --persist-to
folder), creates HarnessWorkflow instances on all of them (round robin), sends each
instance its event through a random live node, and SIGKILLs a random node several times
(restarting it a little later, as a supervisor would). Instances created meanwhile go to
the live nodes. At the end the same checks as the single-node crash harness hold
(tests/crash_harness.py): every instance completes with the output its code implies,
no effect carried a step result the journal later contradicts, every recorded step
result is a value one of its executions reported, every acknowledged event was
delivered, and each (step, attempt) callback ran at most once more per kill.

Short form in CI (tests/e2e/test_nodes.py); long form, against a running PostgreSQL:

    python -m tests.nodes_harness --store postgresql://celld@127.0.0.1:5432/db \\
        --nodes 3 --instances 300 --kills 6
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.celld_server import CelldServer
from tests.crash_harness import PROJECT, Harness, Report
from tests.e2e.counter import Counter, counter_server


class NodesHarness(Harness):
    def __init__(
        self,
        folder: Path,
        store: str,
        *,
        nodes: int,
        instances: int,
        kills: int,
        seed: int,
        lease_ms: int,
        late: int = 0,
    ) -> None:
        super().__init__(folder / "state", instances, kills, seed, store=store)
        self.folder = folder
        self.env = {"CELLD_NODE_LEASE_MS": str(lease_ms)}
        self.servers: list[CelldServer | None] = [None] * nodes
        #: created on a live node while another is dead
        self.late_ids = [f"late{i}" for i in range(late)]
        self.ids = self.ids + self.late_ids

    def start_node(self, index: int) -> CelldServer:
        server = CelldServer(
            PROJECT,
            self.folder / f"node{index}",
            args=("--store", self.store or ""),
            env=self.env,
        )
        server.log_path = self.folder / f"node{index}-celld.log"
        server.start()
        self.servers[index] = server
        return server

    def live(self) -> list[CelldServer]:
        return [s for s in self.servers if s is not None and s.client is not None]

    def url(self) -> str | None:
        live = self.live()
        return self.random.choice(live).url if live else None

    def drops(self) -> Any:
        from collections import Counter as Tally

        total: Tally[str] = Tally()
        for index in range(len(self.servers)):
            self.log_path = self.folder / f"node{index}-celld.log"
            total += super().drops()
        return total

    def create(self, server: CelldServer, ids: list[str], counter: Counter) -> None:
        chunk = [{"id": i, "params": {"upstream": counter.url}} for i in ids]
        response = server.post("/create-batch", params={"wf": "HARNESS"}, json=chunk)
        response.raise_for_status()

    def run(self, counter: Counter, timeout: float) -> Report:
        for index in range(len(self.servers)):
            self.start_node(index)
        early = [i for i in self.ids if i not in self.late_ids]
        nodes = self.live()
        for n, start in enumerate(range(0, len(early), 10)):
            self.create(nodes[n % len(nodes)], early[start : start + 10], counter)
        sender = threading.Thread(target=self.send_events, daemon=True)
        late = list(self.late_ids)
        for kill in range(self.kills):
            time.sleep(self.random.uniform(0.5, 2.0))
            index = self.random.randrange(len(self.servers))
            victim = self.servers[index]
            assert victim is not None
            victim.kill()
            if late:  # instances created on a survivor while the victim is dead
                survivor = self.random.choice(self.live())
                self.create(survivor, late, counter)
                late = []
            if kill == 0:
                sender.start()
            time.sleep(self.random.uniform(0.2, 1.0))
            if kill < self.kills - 1 or len(self.servers) > 2:
                self.start_node(index)  # a supervisor brings it back (empty-handed)
        if not sender.is_alive() and not self._stop.is_set():
            sender.start()
        sender.join(timeout)
        self._stop.set()
        deadline = time.monotonic() + timeout
        statuses: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                server = self.random.choice(self.live())
                statuses = server.post("/statuses", params={"wf": "HARNESS"}, json=self.ids).json()
            except (httpx.HTTPError, ValueError):
                time.sleep(0.2)
                continue
            if all(s.get("status") == "complete" for s in statuses.values()):
                break
            time.sleep(0.2)
        for server in self.live():
            server.stop()
        return self.check(statuses, counter)


def run_nodes_harness(
    store: str,
    *,
    nodes: int = 3,
    instances: int = 60,
    kills: int = 2,
    seed: int = 1,
    timeout: float = 120,
    lease_ms: int = 2_000,
    late: int = 0,
) -> Report:
    with (
        tempfile.TemporaryDirectory(prefix="celld-nodes-") as folder,
        counter_server() as counter,
    ):
        harness = NodesHarness(
            Path(folder),
            store,
            nodes=nodes,
            instances=instances,
            kills=kills,
            seed=seed,
            lease_ms=lease_ms,
            late=late,
        )
        try:
            return harness.run(counter, timeout)
        finally:
            for server in harness.live():
                server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", required=True, help="postgresql://... (an empty database)")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--late", type=int, default=20, help="created after the first kill")
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lease-ms", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    started = time.monotonic()
    report = run_nodes_harness(
        args.store,
        nodes=args.nodes,
        instances=args.instances,
        kills=args.kills,
        seed=args.seed,
        timeout=args.timeout,
        lease_ms=args.lease_ms,
        late=args.late,
    )
    report.exit_with_summary(f"{args.nodes} nodes, ", started)


if __name__ == "__main__":
    main()
