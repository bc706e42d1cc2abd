"""Durable Objects through a Worker: celld against wrangler dev, same project, same driver.

    python bench/objects.py                 # celld only
    python bench/objects.py --wrangler      # both (wrangler dev started by bench/wrangler/start.sh)
    python bench/objects.py --wrangler --out bench/OBJECTS.md

Project: compat/projects/objects. Each call is one HTTP request to the Worker's `GET /rpc`,
which makes one RPC call on a stub, sent by `--concurrency` client threads:

* RPC calls per second to one object (`increment`: a get and a put), and to many (each call
  to one of 400 objects, most of them activated by that call);
* storage operations per second inside one object: `churn(100)` is 100 puts then 100 gets of
  the key-value API, `sqlChurn(100)` 100 inserts then 100 selects by key (SQL class);
* memory per object: resident memory of the server's whole process group before and after
  200 new objects answered a call, divided by 200 (live objects), and, on celld, after they
  were evicted for being idle (the clock moved past the idle time).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.driver import drive, figure_rows, main, table_head  # noqa: E402
from compat.targets import OBJECTS, Target  # noqa: E402

TITLE = "Durable Objects: celld and wrangler dev"
WHAT = (
    "one RPC call per HTTP request to compat/projects/objects (`GET /rpc`). "
    "Writes are durable on both."
)
Call = Callable[[int], tuple[str, list[object]]]  # n -> (object name, [method, *args])


def calls(target: Target, make: Call, count: int, concurrency: int) -> dict[str, float]:
    def send(client: httpx.Client, n: int) -> str | None:
        name, call = make(n)
        response = client.get("/rpc", params={"name": name, "call": json.dumps(call)})
        if response.status_code != 200 or "error" in response.json():
            return response.text[:300]
        return None

    return drive(target.base_url, send, count, concurrency)


def group_rss_kib(pgid: int) -> int:
    """Resident memory of every process in a process group (the server and its children)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def server_pgid(name: str, target: Target) -> int:
    if name == "celld":
        return int(target.server.process.pid)  # type: ignore[attr-defined]
    pid = getattr(target, "pid", None)
    if pid is None:
        raise RuntimeError(f"{target.base_url} was not started here: its memory cannot be read")
    return os.getpgid(pid)


def memory(name: str, target: Target, tag: str, objects: int = 200) -> dict[str, float]:
    pgid = server_pgid(name, target)
    time.sleep(1)
    before = group_rss_kib(pgid)
    calls(target, lambda n: (f"mem-{tag}-{n}", ["increment"]), objects, 4)
    time.sleep(1)
    live = group_rss_kib(pgid)
    out = {"live_kib_per_object": (live - before) / objects}
    if name == "celld":
        # Past the idle time every object is evicted: its isolate freed, its file kept. The
        # allocator keeps freed pages, so RSS barely falls; what shows the cost of an idle
        # object is that 200 more objects, once these are evicted, grow it by little.
        target.request("POST", "/cdn-cgi/celld/clock", params={"advance": 120_000})
        time.sleep(3)
        metrics = target.request("GET", "/cdn-cgi/celld/metrics").text
        live_line = next(x for x in metrics.splitlines() if x.startswith("celld_objects_live "))
        out["live_after_eviction"] = float(live_line.split()[1])
        evicted = group_rss_kib(pgid)
        calls(target, lambda n: (f"mem2-{tag}-{n}", ["increment"]), objects, 4)
        time.sleep(1)
        out["idle_kib_per_object"] = (group_rss_kib(pgid) - evicted) / objects
    return out


def bench(name: str, target: Target, concurrency: int) -> dict[str, dict[str, float]]:
    tag = f"{name}{int(time.time())}"
    workloads: list[tuple[str, int, Call, int]] = [
        ("RPC to one object", 400, lambda n: (f"hot-{tag}", ["increment"]), 1),
        ("RPC to many objects (400)", 400, lambda n: (f"many-{tag}-{n}", ["increment"]), 1),
        ("KV put+get inside one object", 20, lambda n: (f"kv-{tag}", ["churn", 100]), 200),
        ("SQL insert+select inside one object", 20,
         lambda n: (f"sql-{tag}", ["notes.sqlChurn", 100]), 200),
    ]  # fmt: skip
    results: dict[str, dict[str, float]] = {}
    for label, count, make, per_call in workloads:
        figures = calls(target, make, count, concurrency)
        figures["ops_per_s"] *= per_call
        results[label] = figures
        print(f"{name:9} {label:38} {figures}", flush=True)
    results["memory"] = memory(name, target, tag)
    print(f"{name:9} memory {results['memory']}", flush=True)
    return results


def render(runs: dict[str, dict[str, dict[str, float]]], concurrency: int) -> str:
    lines = table_head(TITLE, "objects.py", concurrency, WHAT, "workload", runs)
    lines += figure_rows(runs, [k for k in next(iter(runs.values())) if k != "memory"])
    lines += ["", "| memory per object (KiB of resident memory) | " + " | ".join(runs) + " |"]
    lines.append("|---|" + "---|" * len(runs))
    rows = (
        ("live_kib_per_object", "200 objects live"),
        ("idle_kib_per_object", "200 more, after the first 200 were evicted"),
    )
    for key, label in rows:
        cells = [f"{r['memory'][key]:.0f}" if key in r["memory"] else "n/a" for r in runs.values()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(__doc__, OBJECTS, "objects", bench, render)
