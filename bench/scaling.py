#!/usr/bin/env python3
"""The scaling table in one run: steps/s, object RPCs/s and HTTP req/s for `celld run
--workers 1` and `--workers 2` (SQLite) and for 1, 2 and 3 nodes on one PostgreSQL.

    python bench/scaling.py                          # the whole table (5 to 7 minutes on 2 cores)
    python bench/scaling.py --quick                  # small N, 2 s loads: a smoke run
    python bench/scaling.py --only pg1 pg2 --measure rpc http
    python bench/scaling.py --out bench/NODES.md     # append a dated section there

Rows (--only): workers1, workers2 (one `celld run --workers N` on SQLite), pg1, pg2, pg3
(N `celld run --workers 1` nodes on one throwaway PostgreSQL cluster, tests/pgcluster.py,
with fsync on as bench/nodes.py runs it; a fresh database per row and workload).

Columns (--measure):
- steps: bench/nodes.py's workload (N BenchWorkflow instances of K trivial steps created
  by C concurrent clients spread over the nodes; steps/s = N x K / (last finish - first
  create); p99 of create -> finish).
- rpc: tests/projects/cluster's `GET /do/add?name=cN` (one RPC `add(1)` to one of 16
  counters at random; each call reads and writes the object's storage) as in
  bench/cluster_bindings.py: a call reaching a process or node that does not own the
  counter is forwarded to its owner.
- http: examples/hello's Worker (`GET /some/path`, touches no state), as in
  bench/http_hello.py.
rpc and http are driven by keep-alive connections split evenly over the nodes: one `wrk`
per node, all at once (rates summed, p99 the worst node's), or without `wrk` an asyncio
httpx client in this process (which then takes CPU of its own from the same machine).

Every cell also gives CPU per operation (celld's processes + the database's, /proc), the
scaling factor against the first row of its kind (x vs --workers 1, x vs 1 node); the
second table gives, per row and workload, the cores celld and PostgreSQL kept busy and the
whole machine's idle share over the measured window: where a second process or node adds
less than 2x, it says whether the machine ran out of CPU (idle near 0) or celld did not
use what was there. The load average is printed before and after each row.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import datetime
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from bench.http_hello import measure_wrk  # noqa: E402
from bench.nodes import (  # noqa: E402
    idle_between,
    machine_times,
    postmaster,
    run_config,
    tree_cpu_seconds,
)
from bench.run import group_cpu_seconds  # noqa: E402
from bench.shared_storage import pgcluster_create  # noqa: E402
from tests import pgcluster  # noqa: E402
from tests.celld_server import CelldServer  # noqa: E402

CLUSTER_PROJECT = REPO / "tests" / "projects" / "cluster"
HELLO = REPO / "examples" / "hello"
WORKLOADS = ("steps", "rpc", "http")


@dataclass(frozen=True)
class Config:
    """One row: `count` processes of one `celld run` (kind "processes", SQLite) or
    `count` single-process nodes on one PostgreSQL (kind "nodes")."""

    key: str
    label: str
    kind: str
    count: int


CONFIGS = (
    Config("workers1", "`--workers 1`, SQLite", "processes", 1),
    Config("workers2", "`--workers 2`, SQLite", "processes", 2),
    Config("pg1", "PostgreSQL, 1 node", "nodes", 1),
    Config("pg2", "PostgreSQL, 2 nodes", "nodes", 2),
    Config("pg3", "PostgreSQL, 3 nodes", "nodes", 3),
)


@dataclass(frozen=True)
class Place:
    """Where a workload runs: the row, its store (None: SQLite), the database's
    postmaster (0: none) and a fresh state folder."""

    config: Config
    store: str | None
    db_pid: int
    folder: Path


@dataclass
class Figure:
    """One workload on one row: its rate (operations/s), p99 latency (ms), CPU ms per
    operation (celld, database), cores kept busy (celld, database) and the machine's idle
    share over the measured window."""

    rate: float
    p99_ms: float | None
    celld_ms: float
    db_ms: float
    celld_cores: float
    db_cores: float
    idle: float


@dataclass
class Row:
    config: Config
    load_before: float
    load_after: float = 0.0
    figures: dict[str, Figure] = field(default_factory=dict)


@dataclass(frozen=True)
class Sizes:
    instances: int
    steps: int
    creators: int
    seconds: int
    warm_seconds: int
    rpc_connections: int
    http_connections: int
    objects: int = 16


FULL = Sizes(300, 10, 20, 8, 2, 16, 32)
QUICK = Sizes(40, 5, 8, 2, 1, 8, 16)


# -- formatting (tests/test_bench_scaling.py) ---------------------------------------------


def factor(value: float, base: float | None) -> str:
    """ "1.43x" against the first row of the kind; "" when that row was not measured."""
    if base is None or base <= 0:
        return ""
    return f" ({value / base:.2f}x)"


def baselines(rows: Sequence[Row]) -> dict[tuple[str, str], float]:
    """(kind, workload) -> the rate of that kind's one-process / one-node row. Only a
    count-1 row is a baseline: a factor against 2 nodes would read as one against 1."""
    return {
        (row.config.kind, workload): figure.rate
        for row in rows
        if row.config.count == 1
        for workload, figure in row.figures.items()
    }


#: workload -> (rate heading, latency heading, CPU per what)
UNITS = {
    "steps": ("steps/s", "create → finish p99 (ms)", "step"),
    "rpc": ("object RPCs/s", "RPC p99 (ms)", "RPC"),
    "http": ("req/s", "request p99 (ms)", "req"),
}


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def table(rows: Sequence[Row], workloads: Sequence[str]) -> list[str]:
    """The main table: per workload its rate with the scaling factor, p99 and CPU ms per
    operation (celld + database)."""
    head = ["configuration", "load avg before → after"]
    for w in workloads:
        rate, latency, op = UNITS[w]
        head += [f"{rate} (x vs first of kind)", latency, f"CPU ms/{op}: celld + db"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = baselines(rows)
    for row in rows:
        cells = [row.config.label, f"{row.load_before:.1f} → {row.load_after:.1f}"]
        for w in workloads:
            f = row.figures.get(w)
            if f is None:
                cells += ["-", "-", "-"]
                continue
            cells += [
                _number(f.rate) + factor(f.rate, base.get((row.config.kind, w))),
                "-" if f.p99_ms is None else _number(f.p99_ms),
                f"{f.celld_ms:.2f} + {f.db_ms:.2f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cpu_table(rows: Sequence[Row], workloads: Sequence[str]) -> list[str]:
    """Where the CPU went: cores busy in celld and in the database, and how idle the whole
    machine was, per row and workload."""
    head = ["configuration", *(f"{w}: cores celld + db, machine idle" for w in workloads)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row.config.label]
        for w in workloads:
            f = row.figures.get(w)
            cells.append(
                "-"
                if f is None
                else f"{f.celld_cores:.2f} + {f.db_cores:.2f}, {f.idle * 100:.0f} % idle"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# -- running ----------------------------------------------------------------------------


@contextmanager
def serving(project: Path, at: Place) -> Iterator[list[CelldServer]]:
    """The row's celld processes for `project`: one `--workers N`, or N nodes on the
    store."""
    if at.config.kind == "processes":
        specs = [("--workers", str(at.config.count))]
    else:
        assert at.store is not None
        specs = [("--store", at.store)] * at.config.count
    servers: list[CelldServer] = []
    try:
        for index, args in enumerate(specs):
            server = CelldServer(
                project, at.folder / f"node{index}", args=("--log-level", "warning", *args)
            )
            servers.append(server.start(timeout=120))
        yield servers
    finally:
        for server in servers:
            server.stop()


class Meter:
    """CPU of the celld process groups and the database cluster, and the machine's idle
    share, between start() and stop()."""

    def __init__(self, servers: list[CelldServer], db_pid: int) -> None:
        self.groups = [s.process.pid for s in servers if s.process is not None]
        self.db_pid = db_pid

    def _cpu(self) -> tuple[float, float]:
        celld = sum(group_cpu_seconds(g) for g in self.groups)
        return celld, tree_cpu_seconds(self.db_pid) if self.db_pid else 0.0

    def start(self) -> None:
        self.cpu0, self.machine0, self.t0 = self._cpu(), machine_times(), time.monotonic()

    def figure(self, operations: float, p99_ms: float | None) -> Figure:
        cpu1, machine1, wall = self._cpu(), machine_times(), time.monotonic() - self.t0
        celld, db = cpu1[0] - self.cpu0[0], cpu1[1] - self.cpu0[1]
        ops = max(operations, 1.0)
        return Figure(
            rate=operations / wall,
            p99_ms=p99_ms,
            celld_ms=celld * 1000 / ops,
            db_ms=db * 1000 / ops,
            celld_cores=celld / wall,
            db_cores=db / wall,
            idle=idle_between(self.machine0, machine1),
        )


RPC_LUA = """
math.randomseed(os.time() + %d)
request = function()
  return wrk.format("GET", "/do/add?name=c" .. math.random(1, %d) .. "&n=1")
end
"""


def split(connections: int, nodes: int) -> list[int]:
    """`connections` over `nodes` as evenly as they go (each node at least one)."""
    return [max(1, connections // nodes + (i < connections % nodes)) for i in range(nodes)]


def spread_load(
    urls: list[str], path: Callable[[], str], lua: Callable[[int], Path] | None,
    connections: int, seconds: int,
) -> tuple[float, float | None]:  # fmt: skip
    """(requests completed, worst p99 ms) with `connections` keep-alive connections split
    over `urls`, all loaded at once for `seconds`. `wrk` when installed (`lua(i)` its
    script for node i, or GET `path()`), else `python_load`."""
    each = split(connections, len(urls))
    if shutil.which("wrk") is None:
        return asyncio.run(python_load(urls, path, each, seconds))

    def one(index: int) -> dict[str, float]:
        extra = ("--timeout", "10s", *(("-s", str(lua(index))) if lua else ()))
        target = urls[index] + ("" if lua else path())
        return measure_wrk(target, each[index], seconds, extra)

    with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
        results = list(pool.map(one, range(len(urls))))
    return sum(r["rps"] for r in results) * seconds, max(r.get("p99_ms", 0.0) for r in results)


async def python_load(
    urls: list[str], path: Callable[[], str], each: list[int], seconds: int
) -> tuple[float, float | None]:
    """The fallback without `wrk`: `each[i]` keep-alive connections to urls[i], each sending
    GET path() in turn for `seconds`; (requests completed, p99 ms)."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def connection(client: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            started = time.monotonic()
            (await client.get(path())).raise_for_status()
            latencies.append(time.monotonic() - started)

    clients = [
        httpx.AsyncClient(
            base_url=url, limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            timeout=30,
        )
        for url, n in zip(urls, each, strict=True)
    ]  # fmt: skip
    try:
        await asyncio.gather(
            *(connection(c) for c, n in zip(clients, each, strict=True) for _ in range(n))
        )
    finally:
        for client in clients:
            await client.aclose()
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))] * 1000 if latencies else None
    return len(latencies), p99


def measure_steps(at: Place, sizes: Sizes) -> Figure:
    """bench/nodes.py's workload on this row."""
    config = at.config
    nodes, extra = (1, ("--workers", str(config.count)))
    if config.kind == "nodes":
        nodes, extra = config.count, ()
    r = run_config(
        config.key, nodes, at.store, at.folder, sizes.instances, sizes.steps, sizes.creators,
        at.db_pid, extra=extra,
    )  # fmt: skip
    p99 = r["p99_s"]
    return Figure(
        rate=r["steps_s"],
        p99_ms=None if p99 is None else p99 * 1000,
        celld_ms=r["node_ms_step"],
        db_ms=r["db_ms_step"],
        celld_cores=r["node_cores"],
        db_cores=r["db_cores"],
        idle=r["idle"],
    )


def measure_rpc(at: Place, sizes: Sizes) -> Figure:
    """Counter RPCs through every node (bench/cluster_bindings.py's workload)."""
    with serving(CLUSTER_PROJECT, at) as servers:
        urls = [s.url for s in servers]
        with httpx.Client(timeout=60) as client:
            for n in range(1, sizes.objects + 1):  # every counter activated on its owner
                client.get(f"{urls[n % len(urls)]}/do/add?name=c{n}&n=0").raise_for_status()
        scripts = []
        for index in range(len(urls)):
            scripts.append(at.folder / f"rpc{index}.lua")
            scripts[-1].write_text(RPC_LUA % (index, sizes.objects))

        def path() -> str:
            return f"/do/add?name=c{random.randint(1, sizes.objects)}&n=1"

        load = lambda seconds: spread_load(  # noqa: E731
            urls, path, scripts.__getitem__, sizes.rpc_connections, seconds
        )
        load(sizes.warm_seconds)
        meter = Meter(servers, at.db_pid)
        meter.start()
        done, p99 = load(sizes.seconds)
        return meter.figure(done, p99)


def measure_http(at: Place, sizes: Sizes) -> Figure:
    """GET of examples/hello's stateless route through every node (bench/http_hello.py)."""
    with serving(HELLO, at) as servers:
        urls = [s.url for s in servers]
        load = lambda seconds: spread_load(  # noqa: E731
            urls, lambda: "/some/path", None, sizes.http_connections, seconds
        )
        load(sizes.warm_seconds)
        meter = Meter(servers, at.db_pid)
        meter.start()
        done, p99 = load(sizes.seconds)
        return meter.figure(done, p99)


MEASURES = {"steps": measure_steps, "rpc": measure_rpc, "http": measure_http}


def run_rows(
    configs: Sequence[Config], workloads: Sequence[str], sizes: Sizes, root: Path,
    report: Callable[[Row], None],
) -> list[Row]:  # fmt: skip
    """Every row in turn (a PostgreSQL cluster started once for the node rows, a fresh
    database per row and workload); `report(row)` after each."""
    rows: list[Row] = []
    cluster: Path | None = None
    try:
        for config in configs:
            row = Row(config, os.getloadavg()[0])
            for workload in workloads:
                folder = root / config.key / workload
                folder.mkdir(parents=True)
                store, db_pid = None, 0
                if config.kind == "nodes":
                    if cluster is None:
                        cluster = pgcluster.new_folder()
                        dsn = pgcluster.start(cluster, durable=True)
                    database = f"{config.key}_{workload}"
                    pgcluster_create(dsn, database)
                    store, db_pid = dsn.rsplit("/", 1)[0] + "/" + database, postmaster(cluster)
                place = Place(config, store, db_pid, folder)
                row.figures[workload] = MEASURES[workload](place, sizes)
            row.load_after = os.getloadavg()[0]
            rows.append(row)
            report(row)
    finally:
        if cluster is not None:
            pgcluster.stop(cluster)
            shutil.rmtree(cluster, ignore_errors=True)
    return rows


def header(sizes: Sizes, quick: bool, stamp: str) -> str:
    client = (
        "wrk (one per node, all at once)"
        if shutil.which("wrk")
        else "a Python asyncio httpx client (no wrk installed; it shares the CPU)"
    )
    cores = len(os.sched_getaffinity(0))
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{'Smoke run (--quick): ' if quick else ''}"
        f"{stamp}, commit {commit or '?'}, on "
        f"{platform.node()} ({platform.machine()}, {cores} cores). Steps: {sizes.instances} "
        f"instances x {sizes.steps} steps, {sizes.creators} concurrent creators. RPCs: "
        f"{sizes.rpc_connections} connections over {sizes.objects} counters; HTTP: "
        f"{sizes.http_connections} connections; {sizes.seconds} s each after "
        f"{sizes.warm_seconds} s of warm-up, driven by {client}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small N and 2 s loads")
    parser.add_argument("--only", nargs="+", choices=[c.key for c in CONFIGS], help="rows")
    parser.add_argument("--measure", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--out", type=Path, help="append a dated section to this file")
    args = parser.parse_args()
    configs = [c for c in CONFIGS if args.only is None or c.key in args.only]
    workloads = [w for w in WORKLOADS if w in args.measure]
    if any(c.kind == "nodes" for c in configs) and (why := pgcluster.available()):
        raise SystemExit(f"the PostgreSQL rows need a local PostgreSQL: {why}")
    sizes = QUICK if args.quick else FULL
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    intro = header(sizes, args.quick, stamp)
    print(intro, flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="celld-bench-scaling-") as tmp:
        rows = run_rows(
            configs, workloads, sizes, Path(tmp),
            lambda row: print(table([row], workloads)[-1], flush=True),
        )  # fmt: skip
    lines = [
        intro,
        "",
        *table(rows, workloads),
        "",
        "Where the CPU went (cores kept busy over each measured window; the machine's idle "
        "share includes other users' work):",
        "",
        *cpu_table(rows, workloads),
        "",
        f"({time.monotonic() - started:.0f} s in all)",
    ]
    text = "\n".join(lines)
    print("\n" + text)
    if args.out:
        with args.out.open("a") as handle:
            handle.write(f"\n### Scaling table, {stamp}\n\n{text}\n")


if __name__ == "__main__":
    main()
