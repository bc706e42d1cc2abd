#!/usr/bin/env python3
"""GET /ping latency of a real `celld run` while one request at a time sets many timers.

A pinger process (bench/pinger.py, one keep-alive connection, one request every 5 ms) runs
throughout. First a quiet phase, then `--rounds` requests to /many-timers of
tests/projects/hostile, one after the other: each sets `--timers` timers spread over
`--spread-ms` and answers once all have fired. Printed: /ping p50/p95/p99/max for each
phase, and how long the timer requests took.

    python bench/timer_storm.py
    python bench/timer_storm.py --timers 10000 --rounds 5 --celld-root /path/to/other/checkout

`--celld-root` runs the `celld` package of another checkout (an older commit, to compare)
on this checkout's project: `python -m celld` is started with that folder as its working
directory, so its package is the one imported.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROJECT = ROOT / "tests" / "projects" / "hostile"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, timeout: float = 300) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def start_celld(root: Path, state: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    log = open(log_path, "ab")  # noqa: SIM115 - owned by the subprocess
    process = subprocess.Popen(
        [sys.executable, "-m", "celld", "run", str(PROJECT), "--port", str(port),
         "--persist-to", str(state), "--workers", "1"],
        cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"celld exited early:\n{log_path.read_text()}")
        try:
            if get(f"http://127.0.0.1:{port}/ping", timeout=2)[0] == 200:
                return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("celld did not start in 60 s")


def percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"n": len(ordered), "p50": cuts[49], "p95": cuts[94], "p99": cuts[98],
            "max": ordered[-1]}  # fmt: skip


def measure(url: str, args: argparse.Namespace) -> None:
    pinger = subprocess.Popen(
        [sys.executable, str(HERE / "pinger.py"), f"{url}/ping", "--every-ms",
         str(args.every_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    marks: dict[str, float] = {"quiet": time.time() * 1000}
    time.sleep(args.quiet_s)
    marks["storm"] = time.time() * 1000
    took: list[float] = []
    for _ in range(args.rounds):
        began = time.monotonic()
        status, text = get(f"{url}/many-timers?n={args.timers}&spread={args.spread_ms}")
        took.append(time.monotonic() - began)
        if status != 200:
            print(f"/many-timers answered {status}: {text.strip()[:200]}")
    marks["end"] = time.time() * 1000
    out, _ = pinger.communicate("", timeout=120)
    samples = json.loads(out)
    phases = {
        "quiet": [s for s in samples if marks["quiet"] <= s[0] < marks["storm"]],
        f"{args.timers:,} timers a request": [
            s for s in samples if marks["storm"] <= s[0] < marks["end"]
        ],
    }
    print(f"/ping every {args.every_ms:g} ms on one keep-alive connection")
    print(f"{'phase':<26} {'pings':>6} {'failed':>6} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'p99 ms':>8} {'max ms':>8}")  # fmt: skip
    for name, rows in phases.items():
        failed = sum(1 for s in rows if s[2] != 200)
        stats = percentiles([s[1] for s in rows if s[2] == 200])
        print(f"{name:<26} {stats['n']:>6} {failed:>6} {stats['p50']:>8.1f} "
              f"{stats['p95']:>8.1f} {stats['p99']:>8.1f} {stats['max']:>8.1f}")  # fmt: skip
    print(f"/many-timers took {', '.join(f'{t:.2f}' for t in took)} s "
          f"(timers spread over {args.spread_ms / 1000:g} s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--spread-ms", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--every-ms", type=float, default=5.0)
    parser.add_argument("--quiet-s", type=float, default=5.0)
    parser.add_argument("--celld-root", type=Path, default=ROOT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="celld-timers-") as folder:
        port = free_port()
        log = Path(folder) / "celld.log"
        process = start_celld(args.celld_root.resolve(), Path(folder) / "state", port, log)
        try:
            measure(f"http://127.0.0.1:{port}", args)
        finally:
            os.killpg(process.pid, 15)
            process.wait(30)
        lines = log.read_text().splitlines()
        for index, line in enumerate(lines):
            if "isolate stopped" in line:  # with the line that says why
                print("\n".join(lines[index : index + 2]))


if __name__ == "__main__":
    main()
