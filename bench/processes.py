"""The ceiling of one process per core: the same step workload in P processes at once.

One celld process runs every step's JS and Python on its event-loop thread, so it uses
one core (bench/PROFILE.md). This harness prices what sharding instances over P
processes could give before anyone builds it: P copies of bench/step_cost.py's
in-process `Service` (real isolates, SQLite synchronous=FULL), each with its own state
folder and 1/P of the instances, start their workload at the same moment; the figure is
all their steps over the time from that moment to the last one's end, beside one process
running every instance alone. Separate state folders leave out what one shared store
would add (every process's commits queue for SQLite's one write lock), so this is an
upper bound. Usage:

    python bench/processes.py                  # N=50 x K=100, C=20: 1 process, then 2
    python bench/processes.py -n 200 -k 10 -p 1 2 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from step_cost import PROJECT, _binding, _throughput, _wait_all  # noqa: E402

from celld.project.config import find_config, load_config  # noqa: E402
from celld.server.service import Service, ServiceOptions  # noqa: E402


async def _one_shard(n: int, k: int, c: int, threads: int) -> None:
    """A child: warm up, say "ready", wait for "go", run, report its span as JSON."""
    config = load_config(find_config(PROJECT, None))
    with tempfile.TemporaryDirectory(prefix="celld-shard-") as state:
        service = Service(config, ServiceOptions(persist_to=Path(state), js_threads=threads))
        await service.start()
        try:
            await _binding(service, "create", id="warm", params='{"steps": 2}')
            await _wait_all(service, ["warm"], 0.05)
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            began, cpu0 = time.time(), time.process_time()
            await _throughput(service, n, k, c)
            ended, cpu1 = time.time(), time.process_time()
        finally:
            await service.stop()
    print(json.dumps({"began": began, "ended": ended, "steps": n * k, "cpu": cpu1 - cpu0}))


def run_processes(p: int, n: int, k: int, c: int, threads: int) -> dict[str, float]:
    """Start `p` children with n/p instances each, release them together, and combine."""
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                "-n",
                str(n // p),
                "-k",
                str(k),
                "-c",
                str(max(1, c // p)),
                "--threads",
                str(threads),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(p)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    spans = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise SystemExit(f"a child failed (exit {child.returncode})")
        spans.append(json.loads(out.strip().splitlines()[-1]))
    began = min(s["began"] for s in spans)
    ended = max(s["ended"] for s in spans)
    steps = sum(s["steps"] for s in spans)
    cpu = sum(s["cpu"] for s in spans)
    return {"steps_per_s": steps / (ended - began), "cpu_us_per_step": cpu / steps * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=50, help="instances in all")
    parser.add_argument("-k", type=int, default=100, help="steps per instance")
    parser.add_argument("-c", type=int, default=20, help="concurrent creates in all")
    parser.add_argument("-p", type=int, nargs="+", default=[1, 2], help="process counts")
    parser.add_argument("--threads", type=int, default=2, help="JS threads per process")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_one_shard(args.n, args.k, args.c, args.threads))
        return
    print(f"N={args.n} x K={args.k}, C={args.c} in all; JS threads per process: {args.threads}")
    first = None
    for p in args.p:
        figures = run_processes(p, args.n, args.k, args.c, args.threads)
        first = first or figures["steps_per_s"]
        print(
            f"{p} process(es): {figures['steps_per_s']:7.0f} steps/s "
            f"({figures['steps_per_s'] / first:.2f}x one), "
            f"process CPU {figures['cpu_us_per_step']:.0f} us/step"
        )


if __name__ == "__main__":
    main()
