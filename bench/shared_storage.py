#!/usr/bin/env python3
"""KV writes/s and R2 put MB/s through `celld run` nodes: SQLite (one node) beside one and
two nodes on one PostgreSQL.

    python bench/shared_storage.py                       # prints the table
    python bench/shared_storage.py --out bench/NODES.md  # and appends it there

Workload (tests/projects/shared-storage): C concurrent clients spread over the nodes
(round robin) each PUT /kv/<unique key> with a 100-byte body for S seconds; then each
streams /r2/<unique key> bodies of 4 MB (sent in 64 KiB pieces) for S seconds. A write
counts once its 200 has come back (the value is committed). The PostgreSQL cluster is a
throwaway one on this machine with fsync on (tests/pgcluster.py, durable), as durable as
SQLite's synchronous=FULL.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests import pgcluster  # noqa: E402
from tests.celld_server import CelldServer  # noqa: E402

PROJECT = HERE.parent / "tests" / "projects" / "shared-storage"
R2_BYTES = 4_000_000


def _pieces(data: bytes, size: int = 64 * 1024):  # type: ignore[no-untyped-def]
    for start in range(0, len(data), size):
        yield data[start : start + size]


def load(urls: list[str], clients: int, seconds: float, kind: str) -> int:
    """Writes acknowledged by `clients` concurrent writers in `seconds`."""
    body = os.urandom(R2_BYTES) if kind == "r2" else b"v" * 100

    def client(index: int) -> int:
        done = 0
        url = urls[index % len(urls)]
        deadline = time.monotonic() + seconds
        with httpx.Client(timeout=60) as http:
            while time.monotonic() < deadline:
                path = f"/{kind}/c{index}/{done}"
                content = _pieces(body) if kind == "r2" else body
                http.put(url + path, content=content).raise_for_status()
                done += 1
        return done

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return sum(pool.map(client, range(clients)))


def run_config(store: str | None, nodes: int, folder: Path, clients: int, seconds: float) -> dict:
    servers = []
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for index in range(nodes):
            args = ("--store", store) if store else ()
            servers.append(CelldServer(PROJECT, folder / f"node{index}", args=args).start())
        urls = [s.url for s in servers]
        load(urls, clients, 1.0, "kv")  # warm up isolates and connections
        kv = load(urls, clients, seconds, "kv")
        r2 = load(urls, clients, seconds, "r2")
        return {"kv": kv / seconds, "r2": r2 * R2_BYTES / seconds / 1e6}
    finally:
        for server in servers:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    before = os.getloadavg()[0]
    rows = []
    root = Path(tempfile.mkdtemp(prefix="celld-bench-shared-"))
    try:
        rows.append(("sqlite, 1 node", run_config(None, 1, root / "sqlite", args.clients,
                                                  args.seconds)))  # fmt: skip
        print(rows[-1], flush=True)
        folder = pgcluster.new_folder()  # (its owner may not be this user: see pgcluster)
        dsn = pgcluster.start(folder, durable=True)
        try:
            for nodes in (1, 2):
                database = f"bench{nodes}"
                pgcluster_create(dsn, database)
                rows.append((
                    f"postgresql, {nodes} node{'s' if nodes > 1 else ''}",
                    run_config(dsn.rsplit("/", 1)[0] + "/" + database, nodes,
                               root / f"pg{nodes}", args.clients, args.seconds),
                ))  # fmt: skip
                print(rows[-1], flush=True)
        finally:
            pgcluster.stop(folder)
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    after = os.getloadavg()[0]
    lines = [
        f"Load average before: {before:.1f}, after: {after:.1f} (the machine is shared). "
        f"{args.clients} concurrent clients, {args.seconds:.0f} s per figure, on "
        f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores)",
        "",
        "| store | KV writes/s (100 B) | R2 put MB/s (4 MB streamed bodies) |",
        "|---|---|---|",
        *(f"| {name} | {r['kv']:.0f} | {r['r2']:.1f} |" for name, r in rows),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with args.out.open("a") as handle:
            handle.write("\n" + text)


def pgcluster_create(dsn: str, database: str) -> None:
    import asyncio

    import asyncpg

    async def create() -> None:
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(f'CREATE DATABASE "{database}"')
        finally:
            await connection.close()

    asyncio.run(create())


if __name__ == "__main__":
    main()
