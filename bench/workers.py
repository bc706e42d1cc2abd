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
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.http_hello import measure_wrk  # noqa: E402
from bench.nodes import run_config, workload_arguments  # noqa: E402
from tests.celld_server import CelldServer  # noqa: E402

HELLO = HERE.parent / "examples" / "hello"


def steps(workers: int, work: Path, n: int, k: int, c: int) -> dict[str, Any]:
    name = f"steps-{workers}"
    return run_config(name, 1, None, work, n, k, c, 0, extra=("--workers", str(workers)))


def http(workers: int, work: Path) -> dict[str, float]:
    args = ("--log-level", "warning", "--workers", str(workers))
    server = CelldServer(HELLO, work / f"http-{workers}", args=args).start(timeout=120)
    try:
        measure_wrk(f"{server.url}/warm-up", 32, 2)
        return measure_wrk(f"{server.url}/some/path", 32, 8)
    finally:
        server.stop()


def main() -> None:
    parser = workload_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument("--rounds", type=int, default=3)
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
                    f"{s['p50_s']:.2f} | {s['p99_s']:.2f} | {s['node_ms_step']:.2f} | "
                    f"{h['rps']:.0f} | {h['p99_ms']:.1f} |"
                )
                print(line, flush=True)
                lines.append(line)
    print("\n".join(lines))
    if args.out is not None:
        args.out.write_text("".join(f"{line}\n" for line in lines))


if __name__ == "__main__":
    main()
