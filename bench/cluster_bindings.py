#!/usr/bin/env python3
"""`celld run --workers 1` beside `--workers 2`: Durable Object RPCs/s and KV writes/s.

    python bench/cluster_bindings.py [--rounds 3] [--seconds 8] [--objects 64]

tests/projects/cluster's Worker under `wrk -t2 -c16` (keep-alive connections): "object
RPCs" is `GET /do/add?name=cN` (one RPC `add(1)` to one of N counters, chosen at random
per request; each call reads and writes the object's storage), "KV writes" is
`POST /kv/put?key=<random>` (one `KV.put`, synchronous=FULL). With 2 processes each
counter lives in one of them and a call that arrives at the other is forwarded over the
local socket; KV is one SQLite file both processes write. The process counts alternate
round by round (the machine is shared), the load average is printed with each row.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import httpx  # noqa: E402

from bench.http_hello import measure_wrk  # noqa: E402
from tests.celld_server import CelldServer  # noqa: E402

PROJECT = HERE.parent / "tests" / "projects" / "cluster"

RPC_LUA = """
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/do/add?name=c" .. math.random(1, %d) .. "&n=1")
end
"""
KV_LUA = """
math.randomseed(os.time())
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("POST", "/kv/put?key=k" .. math.random(1, 1000000000) .. "-" .. counter,
    nil, "value")
end
"""


def wrk(url: str, script: Path, seconds: int) -> dict[str, float]:
    return measure_wrk(url, 16, seconds, ("--timeout", "10s", "-s", str(script)))


def measure(workers: int, work: Path, scripts: dict[str, Path], seconds: int, objects: int) -> dict:
    args = ("--log-level", "warning", "--workers", str(workers))
    work.mkdir(parents=True, exist_ok=True)
    server = CelldServer(PROJECT, work / f"state-{workers}", args=args).start(timeout=120)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for n in range(1, objects + 1):  # warm-up: every object activated
                client.get(f"/do/add?name=c{n}&n=0").raise_for_status()
        wrk(server.url, scripts["rpc"], 2)
        return {name: wrk(server.url, path, seconds) for name, path in scripts.items()}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--objects", type=int, default=16)
    args = parser.parse_args()
    print(
        f"wrk -t2 -c16 -d{args.seconds}s; {args.objects} counters; "
        f"{len(os.sched_getaffinity(0))} cores\n"
    )
    print(
        "| round | load avg | --workers | object RPCs/s | RPC p99 (ms) | KV writes/s "
        "| KV p99 (ms) |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="celld-bench-") as folder:
        work = Path(folder)
        scripts = {"rpc": work / "rpc.lua", "kv": work / "kv.lua"}
        scripts["rpc"].write_text(RPC_LUA % args.objects)
        scripts["kv"].write_text(KV_LUA)
        for round_no in range(1, args.rounds + 1):
            for workers in (1, 2):
                load = os.getloadavg()[0]
                got = measure(workers, work / f"r{round_no}", scripts, args.seconds, args.objects)
                rpc, kv = got["rpc"], got["kv"]
                print(
                    f"| {round_no} | {load:.1f} | {workers} | {rpc['rps']:.0f} | "
                    f"{rpc['p99_ms']:.1f} | {kv['rps']:.0f} | {kv['p99_ms']:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
