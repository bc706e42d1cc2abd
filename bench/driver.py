"""The HTTP load driver the benchmarks share: N client threads, a count of requests,
operations per second and latency percentiles as the client sees them."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

#: Sends request number n with the client; returns an error text, or None when it worked.
Send = Callable[[httpx.Client, int], "str | None"]


def drive(base_url: str, send: Send, count: int, concurrency: int) -> dict[str, float]:
    """Send `count` requests from `concurrency` threads; raise if any failed."""
    latencies: list[float] = []
    errors: list[str] = []
    counter = iter(range(count))
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client(base_url=base_url, timeout=120) as client:
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return
                started = time.perf_counter()
                error = send(client, n)
                latencies.append(time.perf_counter() - started)
                if error is not None:
                    errors.append(error)

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
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
    }


def figure_rows(runs: dict[str, dict[str, dict[str, float]]], labels: list[str]) -> list[str]:
    """Markdown rows: a label, then per target its rate and its p50 / p99 latency."""
    lines = []
    for label in labels:
        cells = []
        for figures in runs.values():
            f = figures[label]
            cells += [f"{f['ops_per_s']:.0f}", f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


Runs = dict[str, dict[str, dict[str, float]]]


def machine_line(script: str, concurrency: int, what: str) -> str:
    """The sentence under a results table's title: the command, the machine, the load."""
    return (
        f"`python bench/{script} --wrangler` on {os.cpu_count()} cores "
        f"({platform.machine()}, Python {platform.python_version()}), "
        f"{time.strftime('%Y-%m-%d')}; {concurrency} client threads; {what}"
    )


def table_head(
    title: str, script: str, concurrency: int, what: str, column: str, runs: Runs
) -> list[str]:
    """A results file's title, machine line and the head of its figures table."""
    return [
        f"# {title}",
        "",
        machine_line(script, concurrency, what),
        "",
        f"| {column} | " + " | ".join(f"{t} per s | {t} p50 / p99 ms" for t in runs) + " |",
        "|---|" + "---|---|" * len(runs),
    ]


def main(
    doc: str,
    project: Path,
    prefix: str,
    bench: Callable[[str, Any, int], dict[str, dict[str, float]]],
    render: Callable[[Runs, int], str],
) -> None:
    """The benchmarks' command line: celld (and wrangler dev with --wrangler) on `project`,
    each fresh in a temporary state folder; the rendered table printed and, with --out,
    written."""
    from compat.targets import start_celld, start_wrangler

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--wrangler", action="store_true")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: Runs = {}
    starters = [("celld", start_celld)] + ([("wrangler", start_wrangler)] if args.wrangler else [])
    for name, start in starters:
        with tempfile.TemporaryDirectory(prefix=f"bench-{prefix}-{name}-") as folder:
            target = start(Path(folder) / "state", project)
            try:
                runs[name] = bench(name, target, args.concurrency)
            finally:
                target.close()
    text = render(runs, args.concurrency)
    print(text)
    if args.out:
        args.out.write_text(text)
