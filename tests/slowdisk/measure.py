"""How long one SQLite commit takes with and without the slow-disk shim.

    python -m tests.slowdisk.measure --write-ms 40 --commits 50

It commits in a child process set up as celld's store is (WAL, synchronous=FULL, the
same Python and libsqlite3), once plainly and once under the shim, and prints the median
and 90th percentile of the commit time and how many calls the shim slowed. Then it does
the same through a real `celld run` (the recorder test project): the time the operator
API takes to answer a create, which commits the new instance before it answers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.slowdisk import build, calls_slowed, env

CHILD = r"""
import json, sqlite3, sys, time
path, commits = sys.argv[1], int(sys.argv[2])
connection = sqlite3.connect(path, isolation_level=None)
connection.execute("PRAGMA journal_mode=WAL")
connection.execute("PRAGMA synchronous=FULL")
connection.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
times = []
for n in range(commits):
    started = time.perf_counter()
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT INTO t (v) VALUES (?)", ("x" * 200,))
    connection.execute("COMMIT")
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps(times))
"""


def commit_times(folder: Path, commits: int, extra_env: dict[str, str]) -> list[float]:
    """Milliseconds per commit of `commits` commits to a fresh database in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder / "db.sqlite"), str(commits)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **extra_env},
    )
    return list(json.loads(done.stdout))


def create_times(folder: Path, creates: int, extra_env: dict[str, str]) -> list[float]:
    """Milliseconds per instance create through the operator API of a `celld run`
    whose state is in `folder` (each create is answered once it is committed)."""
    from celld.client import Client
    from tests.celld_server import CelldServer
    from tests.recorder_harness import PROJECT

    folder.mkdir(parents=True, exist_ok=True)
    server = CelldServer(PROJECT, folder / "state", env=extra_env)
    server.start()
    try:
        with Client(server.url) as client:
            workflow = client.workflow("secret-workflow")
            times = []
            for n in range(creates):
                started = time.perf_counter()
                # a reader with no writer: it ends at once and sends nothing
                workflow.create(id=f"m{n}", params={"role": "reader", "writer": "none"})
                times.append((time.perf_counter() - started) * 1000)
            return times
    finally:
        server.stop()


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9)]
    return f"median {statistics.median(ordered):.2f} ms, p90 {p90:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sync-ms", type=int, default=0)
    parser.add_argument("--write-ms", type=int, default=40)
    parser.add_argument("--commits", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="celld-slowdisk-") as name:
        folder = Path(name)
        library = build(folder / "shim")
        plain = commit_times(folder / "plain", args.commits, {})
        count = folder / "slowed"
        shimmed_env = env(
            library, folder / "slow", sync_ms=args.sync_ms, write_ms=args.write_ms,
            count_file=count,
        )  # fmt: skip
        slowed = commit_times(folder / "slow", args.commits, shimmed_env)
        print(f"without the shim: {summary(plain)}")
        print(
            f"with the shim (sync {args.sync_ms} ms, write {args.write_ms} ms): "
            f"{summary(slowed)}; {calls_slowed(count)} calls slowed"
        )
        plain = create_times(folder / "celld-plain", args.commits, {})
        count = folder / "celld-slowed"
        shimmed_env = env(
            library, folder / "celld-slow" / "state", sync_ms=args.sync_ms,
            write_ms=args.write_ms, count_file=count,
        )  # fmt: skip
        slowed = create_times(folder / "celld-slow", args.commits, shimmed_env)
        print(f"celld create, without the shim: {summary(plain)}")
        print(
            f"celld create, with the shim: {summary(slowed)}; "
            f"{calls_slowed(count)} calls slowed in celld"
        )


if __name__ == "__main__":
    main()
