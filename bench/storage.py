"""Storage bindings through a Worker: celld against wrangler dev, same project, same driver.

    python bench/storage.py                 # celld only
    python bench/storage.py --wrangler      # both (wrangler dev started by the oracle scripts)
    python bench/storage.py --wrangler --out bench/STORAGE.md

Each operation is one HTTP request to the compat core project's `POST /storage` (one binding
call inside the Worker), sent by `--concurrency` client threads. Figures: operations per second
over the whole workload and the request latency p50/p99 as the client sees it. Every write is
durable on both targets before it is acknowledged (celld: SQLite synchronous=FULL and fsync of
R2 bodies). Fresh server and state folder per target.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compat.targets import Target, start_celld, start_wrangler  # noqa: E402

Op = Callable[[int], dict[str, Any]]
VALUE_1K = "v" * 1024
# Built inside the Worker, so the figure is the binding's, not the HTTP body's.
BODY_64K = {"$repeat": ["b", 65536]}


def workloads(tag: str) -> list[tuple[str, int, Op | list[Op]]]:
    t = f"bench_{tag}"
    return [
        ("KV put 1 KiB", 400, lambda n: {"b": "KV", "m": "put", "args": [f"{tag}:{n}", VALUE_1K]}),
        ("KV get 1 KiB", 400, lambda n: {"b": "KV", "m": "get", "args": [f"{tag}:{n}"]}),
        ("D1 insert (one statement)", 400, lambda n: {
            "b": "DB", "prepare": f"INSERT INTO {t} (n, body) VALUES (?, ?)",
            "bind": [n, VALUE_1K], "m": "run"}),
        ("D1 batch of 10 inserts", 100, lambda n: {
            "b": "DB", "m": "batch", "statements": [
                {"prepare": f"INSERT INTO {t} (n, body) VALUES (?, ?)", "bind": [n * 10 + i, "x"]}
                for i in range(10)]}),
        ("D1 select by key", 400, lambda n: {
            "b": "DB", "prepare": f"SELECT * FROM {t} WHERE n = ?", "bind": [n], "m": "first"}),
        ("R2 put 64 KiB", 200, lambda n: {
            "b": "BUCKET", "m": "put", "args": [f"{tag}/{n}", BODY_64K]}),
        ("R2 get 64 KiB", 200, lambda n: {"b": "BUCKET", "m": "get", "args": [f"{tag}/{n}"],
                                          "read": "length"}),
    ]  # fmt: skip


def run_workload(target: Target, make: Op, count: int, concurrency: int) -> dict[str, float]:
    latencies: list[float] = []
    errors: list[str] = []
    counter = iter(range(count))
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client(base_url=target.base_url, timeout=120) as client:
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return
                started = time.perf_counter()
                response = client.post("/storage", json=[make(n)])
                latencies.append(time.perf_counter() - started)
                result = response.json()[0] if response.status_code == 200 else response.text
                if isinstance(result, dict) and "error" in result:
                    errors.append(str(result["error"]))

    began = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"{len(errors)} operations failed, first: {errors[0]}")
    latencies.sort()
    return {
        "ops_per_s": count / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def bench(name: str, target: Target, concurrency: int) -> dict[str, dict[str, float]]:
    tag = f"{name}{int(time.time())}"
    setup = [{"b": "DB", "m": "exec", "args": [f"CREATE TABLE bench_{tag} (n INTEGER, body TEXT)"]}]
    target.request("POST", "/storage", json=setup).raise_for_status()
    results = {}
    for label, count, make in workloads(tag):
        results[label] = run_workload(target, make, count, concurrency)  # type: ignore[arg-type]
        print(f"{name:9} {label:28} {results[label]}", flush=True)
    return results


def render(runs: dict[str, dict[str, dict[str, float]]], concurrency: int) -> str:
    lines = [
        "# Storage bindings: celld and wrangler dev",
        "",
        f"`python bench/storage.py --wrangler` on {os.cpu_count()} cores "
        f"({platform.machine()}, Python {platform.python_version()}), "
        f"{time.strftime('%Y-%m-%d')}; {concurrency} client threads; one binding call per "
        "HTTP request to compat/projects/core (`POST /storage`). Writes are durable on both.",
        "",
        "| operation | " + " | ".join(f"{t} ops/s | {t} p50 / p99 ms" for t in runs) + " |",
        "|---|" + "---|---|" * len(runs),
    ]
    labels = next(iter(runs.values())).keys()
    for label in labels:
        cells = []
        for figures in runs.values():
            f = figures[label]
            cells += [f"{f['ops_per_s']:.0f}", f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wrangler", action="store_true")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, dict[str, dict[str, float]]] = {}
    starters = [("celld", start_celld)] + ([("wrangler", start_wrangler)] if args.wrangler else [])
    for name, start in starters:
        with tempfile.TemporaryDirectory(prefix=f"bench-storage-{name}-") as folder:
            target = start(Path(folder) / "state")
            try:
                runs[name] = bench(name, target, args.concurrency)
            finally:
                target.close()
    text = render(runs, args.concurrency)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
