#!/usr/bin/env python3
"""Durable Object RPCs/s and D1 inserts/s through `celld run` nodes: SQLite (one node)
beside one and two nodes on one PostgreSQL.

    python bench/shared_objects.py                       # prints the table
    python bench/shared_objects.py --out bench/NODES.md  # and appends it there

Workload (tests/projects/shared-storage): C concurrent clients, client i sending to node
i mod N. Each calls `inc()` on objects of its own (one SQL read and one insert per turn,
so every turn commits and, on PostgreSQL, writes its pages before it answers) for S
seconds: "owner" when the client's node owns them (it placed them by calling first),
"forwarded" when every call goes to the other node and is forwarded to the owner through
the database. Then each client inserts rows into the one D1 database for S seconds. A
call counts once its 200 has come back. The PostgreSQL cluster is a throwaway one on this
machine with fsync on (tests/pgcluster.py, durable).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from shared_storage import bench_main, in_parallel  # noqa: E402

from tests.celld_server import CelldServer  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes (threads included), from /proc."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def cluster_pids(folder: Path | None) -> list[int]:
    """The PostgreSQL cluster's postmaster and its children (backends, WAL writer...)."""
    if folder is None:
        return []
    postmaster = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if f"\nPPid:\t{postmaster}\n" in status:
                pids.append(int(entry.name))
    return pids


def load(urls: list[str], clients: int, seconds: float, kind: str, shift: int = 0) -> int:
    """Calls acknowledged by `clients` concurrent clients in `seconds`; client i owns the
    objects "o<i>-*" and sends to node (i + shift) mod N."""

    def client(index: int) -> int:
        done = 0
        url = urls[(index + shift) % len(urls)]
        deadline = time.monotonic() + seconds
        with httpx.Client(timeout=60) as http:
            while time.monotonic() < deadline:
                if kind == "d1":
                    http.put(f"{url}/d1/{kind}{shift}-{index}-{done}").raise_for_status()
                else:
                    http.post(f"{url}/do/o{index}-{done % 4}/inc").raise_for_status()
                done += 1
        return done

    return in_parallel(clients, client)


def measure(servers: list[CelldServer], clients: int, seconds: float, cluster: Any) -> dict:
    urls = [s.url for s in servers]
    load(urls, clients, 1.0, "do")  # warm up; places each client's objects on its node
    celld = [s.process.pid for s in servers if s.process is not None]
    database = cluster_pids(cluster)
    before = cpu_seconds(celld), cpu_seconds(database)
    calls = load(urls, clients, seconds, "do")
    after = cpu_seconds(celld), cpu_seconds(database)
    result = {
        "do": calls / seconds,
        # CPU ms per object call: the nodes' processes, and the database's
        "celld_ms": (after[0] - before[0]) * 1000 / calls,
        "pg_ms": (after[1] - before[1]) * 1000 / calls,
    }
    if len(servers) > 1:
        result["forwarded"] = load(urls, clients, seconds, "do", shift=1) / seconds
    load(urls, clients, 1.0, "d1")
    result["d1"] = load(urls, clients, seconds, "d1", shift=2) / seconds
    return result


def _row(name: str, r: dict) -> str:
    forwarded = f"{r['forwarded']:.0f}" if "forwarded" in r else "-"
    return (
        f"| {name} | {r['do']:.0f} | {r['celld_ms']:.1f} + {r['pg_ms']:.1f} | {forwarded} "
        f"| {r['d1']:.0f} |"
    )


def main() -> None:
    bench_main(
        __doc__,
        measure,
        "objects",
        [
            "| store | object RPCs/s (caller's node owns) | CPU ms per call: nodes + database "
            "| object RPCs/s (forwarded) | D1 inserts/s (one database) |",
            "|---|---|---|---|---|",
        ],
        _row,
    )


if __name__ == "__main__":
    main()
