#!/usr/bin/env python3
"""`celld run --workers 1` beside `--workers 2`: steps/s and HTTP requests/s.

    python bench/workers.py [--rounds 3] [--instances 300] [--steps 10] [--out FILE]

Steps/s: bench/nodes.py's workload (N BenchWorkflow instances of K trivial steps, created
one by one through the Worker by C concurrent clients; steps/s = N x K / (last finish -
first create)). Creates reach whichever process accepts the connection, and half of them
are forwarded to the other process, as instances are sharded by id. HTTP: `wrk` (32
connections, 8 s) on examples/hello's Worker, which touches no state. The two process
counts alternate round by round, so a change in the machine's load (it is shared) falls
on both alike; the load average is printed before each round.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.http_hello import measure_wrk  # noqa: E402
from bench.run import PROJECT, Api, group_cpu_seconds, now_ms, pct  # noqa: E402
from tests.celld_server import CelldServer  # noqa: E402

HELLO = HERE.parent / "examples" / "hello"


def steps(workers: int, work: Path, n: int, k: int, c: int) -> dict[str, Any]:
    args = ("--log-level", "warning", "--workers", str(workers))
    server = CelldServer(PROJECT, work / f"steps-{workers}", args=args).start(timeout=120)
    api = Api(server.url)
    try:
        ids = [f"b{i}" for i in range(n)]
        sent: dict[str, float] = {}
        group = server.process.pid if server.process else 0
        cpu0 = group_cpu_seconds(group)
        first = now_ms()

        def create(instance_id: str) -> None:
            sent[instance_id] = now_ms()
            api.create("BENCH", instance_id, {"steps": k})

        with concurrent.futures.ThreadPoolExecutor(c) as pool:
            list(pool.map(create, ids))
        done = api.wait_all("BENCH", ids, lambda s: s.get("status") == "complete", 600)
        cpu = group_cpu_seconds(group) - cpu0
        finished = {i: done[i]["output"]["finished_at"] for i in ids}
        span = (max(finished.values()) - first) / 1000
        latencies = [(finished[i] - sent[i]) / 1000 for i in ids]
        return {
            "steps_s": n * k / span,
            "p50_s": pct(latencies, 50),
            "p99_s": pct(latencies, 99),
            "ms_step": cpu * 1000 / (n * k),
        }
    finally:
        api.close()
        server.stop()


def http(workers: int, work: Path) -> dict[str, float]:
    args = ("--log-level", "warning", "--workers", str(workers))
    server = CelldServer(HELLO, work / f"http-{workers}", args=args).start(timeout=120)
    try:
        measure_wrk(f"{server.url}/warm-up", 32, 2)
        return measure_wrk(f"{server.url}/some/path", 32, 8)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    n, k, c = args.instances, args.steps, args.clients
    lines = [
        f"{n} instances x {k} steps, {c} concurrent creators; HTTP: wrk -c32 -d8s on "
        f"examples/hello; {len(os.sched_getaffinity(0))} cores",
        "",
        "| round | load avg | --workers | steps/s | latency p50 (s) | latency p99 (s) "
        "| CPU ms/step | HTTP req/s | HTTP p99 (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="celld-bench-workers-") as tmp:
        for round_ in range(1, args.rounds + 1):
            for workers in (1, 2):
                work = Path(tmp) / f"r{round_}"
                work.mkdir(exist_ok=True)
                load = os.getloadavg()[0]
                s = steps(workers, work, n, k, c)
                h = http(workers, work)
                line = (
                    f"| {round_} | {load:.1f} | {workers} | {s['steps_s']:.0f} | "
                    f"{s['p50_s']:.2f} | {s['p99_s']:.2f} | {s['ms_step']:.2f} | "
                    f"{h['rps']:.0f} | {h['p99_ms']:.1f} |"
                )
                print(line, flush=True)
                lines.append(line)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
