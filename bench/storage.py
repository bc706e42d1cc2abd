"""Storage bindings through a Worker: celld against wrangler dev, same project, same driver.

    python bench/storage.py                 # celld only
    python bench/storage.py --wrangler      # both (wrangler dev started by bench/wrangler/start.sh)
    python bench/storage.py --wrangler --out bench/STORAGE.md

Each operation is one HTTP request to the compat core project's `POST /storage` (one binding
call inside the Worker), sent by `--concurrency` client threads. Figures: operations per second
over the whole workload and the request latency p50/p99 as the client sees it. Every write is
durable on both targets before it is acknowledged (celld: SQLite synchronous=FULL and fsync of
R2 bodies). Fresh server and state folder per target.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.driver import drive, figure_rows, main, table_head  # noqa: E402
from compat.targets import CORE, Target  # noqa: E402

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
    def send(client: httpx.Client, n: int) -> str | None:
        response = client.post("/storage", json=[make(n)])
        result = response.json()[0] if response.status_code == 200 else response.text
        if isinstance(result, dict) and "error" in result:
            return str(result["error"])
        return None

    return drive(target.base_url, send, count, concurrency)


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
    what = (
        "one binding call per HTTP request to compat/projects/core (`"
        "POST /storage`). Writes are durable on both."
    )
    lines = table_head(
        "Storage bindings: celld and wrangler dev",
        "storage.py",
        concurrency,
        what,
        "operation",
        runs,
    )
    lines += figure_rows(runs, list(next(iter(runs.values()))))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(__doc__, CORE, "storage", bench, render)
