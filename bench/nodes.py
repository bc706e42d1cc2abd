#!/usr/bin/env python3
"""Several nodes on PostgreSQL beside SQLite: steps/s and create-to-complete latency.

    python bench/nodes.py                        # sqlite, postgresql x1, postgresql x2
    python bench/nodes.py --out bench/NODES.md

One workload, the same for every configuration: N BenchWorkflow instances of K trivial
steps, created one by one by C concurrent clients spread over the nodes (round robin).
Latency is create sent → the `Date.now()` the workflow records after its last step.
CPU is counted apart for the celld nodes (all of them) and the database's processes.

The PostgreSQL cluster is a throwaway one (tests/pgcluster.py) on this machine, with
fsync on, so that a commit there is as durable as SQLite's synchronous=FULL.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.run import PROJECT, Api, group_cpu_seconds, now_ms, pct, proc_stats  # noqa: E402
from tests import pgcluster  # noqa: E402
from tests.celld_server import CelldServer  # noqa: E402


def postmaster(folder: Path) -> int:
    return int((folder / "data" / "postmaster.pid").read_text().split()[0])


def tree_cpu_seconds(root: int) -> float:
    """user+system seconds of `root` and its live children (the postmaster and its
    backends; they do not share a process group)."""
    total = sum(
        int(fields[11]) + int(fields[12])
        for pid, fields in proc_stats()
        if pid == root or int(fields[1]) == root
    )
    return total / os.sysconf("SC_CLK_TCK")


def machine_times() -> tuple[float, float]:
    """(idle, total) jiffies of every core since boot (/proc/stat's first line): the
    difference between two readings gives how idle the whole machine was in between,
    other users' work included."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])  # idle + iowait; without guest time


def idle_between(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The machine's idle fraction between two `machine_times()` readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else 0.0


def run_config(
    name: str,
    nodes: int,
    store: str | None,
    work: Path,
    n: int,
    k: int,
    c: int,
    db_pid: int,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One configuration's figures; `extra` is given to every node (bench/workers.py)."""
    servers = []
    for index in range(nodes):
        args = ["--log-level", "warning", *extra] + (["--store", store] if store else [])
        server = CelldServer(PROJECT, work / f"{name}-{index}", args=tuple(args))
        servers.append(server.start(timeout=120))
    apis = [Api(s.url) for s in servers]
    try:
        ids = [f"b{i}" for i in range(n)]
        sent: dict[str, float] = {}
        groups = [s.process.pid for s in servers if s.process]

        def cpu() -> tuple[float, float]:
            nodes_cpu = sum(group_cpu_seconds(g) for g in groups)
            return nodes_cpu, tree_cpu_seconds(db_pid) if db_pid else 0.0

        cpu0, machine0 = cpu(), machine_times()
        first = now_ms()

        def create(item: tuple[int, str]) -> None:
            index, instance_id = item
            sent[instance_id] = now_ms()
            apis[index % nodes].create("BENCH", instance_id, {"steps": k})

        with concurrent.futures.ThreadPoolExecutor(c) as pool:
            list(pool.map(create, enumerate(ids)))
        done = apis[0].wait_all("BENCH", ids, lambda s: s.get("status") == "complete", 600)
        cpu1, machine1 = cpu(), machine_times()
        finished = {i: done[i]["output"]["finished_at"] for i in ids}
        span = (max(finished.values()) - first) / 1000
        latencies = [(finished[i] - sent[i]) / 1000 for i in ids]
        return {
            "config": name,
            "steps_s": n * k / span,
            "inst_s": n / span,
            "p50_s": pct(latencies, 50),
            "p99_s": pct(latencies, 99),
            "node_ms_step": (cpu1[0] - cpu0[0]) * 1000 / (n * k),
            "db_ms_step": (cpu1[1] - cpu0[1]) * 1000 / (n * k),
            # cores kept busy while the steps ran (first create to last finish), and the
            # whole machine's idle share
            "node_cores": (cpu1[0] - cpu0[0]) / span,
            "db_cores": (cpu1[1] - cpu0[1]) / span,
            "idle": idle_between(machine0, machine1),
        }
    finally:
        for api in apis:
            api.close()
        for server in servers:
            server.stop()


def workload_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The workload's options (here and in bench/workers.py)."""
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--out", type=Path)
    return parser


def main() -> None:
    args = workload_arguments(argparse.ArgumentParser(description=__doc__)).parse_args()
    load = os.getloadavg()[0]
    why = pgcluster.available()
    if why:
        raise SystemExit(why)
    n, k, c = args.instances, args.steps, args.clients
    results = []
    with tempfile.TemporaryDirectory(prefix="celld-bench-nodes-") as tmp:
        work = Path(tmp)
        results.append(run_config("sqlite, 1 node", 1, None, work, n, k, c, 0))
        for nodes in (1, 2):
            folder = pgcluster.new_folder()
            try:
                dsn = pgcluster.start(folder, durable=True)
                results.append(
                    run_config(
                        f"postgresql, {nodes} node{'s' if nodes > 1 else ''}",
                        nodes,
                        dsn,
                        work,
                        n,
                        k,
                        c,
                        postmaster(folder),
                    )  # fmt: skip
                )
            finally:
                pgcluster.stop(folder)
                shutil.rmtree(folder, ignore_errors=True)
    cores = len(os.sched_getaffinity(0))
    lines = [
        f"Load average before: {load:.1f} (the machine is shared). "
        f"{n} instances x {k} steps, {c} concurrent creators, on {platform.node()} "
        f"({platform.machine()}, {cores} cores)",
        "",
        "| store | steps/s | instances/s | latency p50 (s) | latency p99 (s) "
        "| celld CPU ms/step | database CPU ms/step |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['config']} | {r['steps_s']:.0f} | {r['inst_s']:.1f} | {r['p50_s']:.2f} | "
            f"{r['p99_s']:.2f} | {r['node_ms_step']:.2f} | {r['db_ms_step']:.2f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
