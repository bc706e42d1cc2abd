"""What createBatch of sleepers and hibernated wake-ups cost, in one process.

    python bench/create_cost.py create [--n 5000] [--profile]
    python bench/create_cost.py wake [--n 1000]

A real `Service` on bench/project (real QuickJS isolates, a real SQLite store in a temp
folder, synchronous=FULL), driven through the same `wf.binding` operation the Worker's
binding uses, so no HTTP is in the figures.

`create`: createBatch N `SleeperWorkflow` instances that sleep a day (chunks of 100, four
at a time), wait until every one has run to its sleep and hibernated, and report wall
time, instances/s, CPU per instance by thread (event loop, JS threads, store writer,
store reader), the JS threads' split between creating isolates and running turns,
isolates created, commits and rows, and RSS (peak and after a trim).

`wake`: residency 500 ms, N instances of the test project's scripted workflow that sleep
until one absolute deadline (`--lead` seconds after the start); once all hibernated,
report how late each one's step after the sleep finished, from the engine's own rows
(p50/p99/max), and the CPU per wake-up.

On a shared machine wall-clock figures are noise; compare CPU per instance across runs
of the same harness.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import ctypes
import os
import pstats
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bounded import rss_mb  # noqa: E402 - bench/bounded.py, beside this script

from celld.cells.manager import CellSettings  # noqa: E402
from celld.isolate.isolate import Isolate  # noqa: E402
from celld.project.config import find_config, load_config  # noqa: E402
from celld.server.service import Service, ServiceOptions  # noqa: E402
from celld.store.sqlite import SqliteStore  # noqa: E402

PROJECT = ROOT / "bench" / "project"
WORKFLOW = "sleeper-workflow"
#: The test project's scripted workflow: it can sleep until an absolute time.
SCRIPTED = ROOT / "tests" / "projects" / "durable"
SCRIPT_WORKFLOW = "script-workflow"
CHUNK = 100
DAY_MS = 86_400_000


# -- measuring ---------------------------------------------------------------------------


def thread_cpu() -> dict[str, float]:
    """CPU seconds by thread kind, from /proc (every thread of this process)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = defaultdict(float)
    main = threading.main_thread().native_id
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            name = names.get(int(tid), "")
        except OSError:
            continue
        cpu = (int(fields[11]) + int(fields[12])) / tick
        if int(tid) == main:
            kind = "loop"
        elif name.startswith(("celld-js", "celld-wf")):
            kind = "js"
        elif name.startswith("celld-sqlite"):
            kind = "writer"
        else:
            kind = "other"  # aiosqlite reader, executor threads
        out[kind] += cpu
    return dict(out)


class Counters:
    """Thread CPU spent creating isolates and in turns, and store commits and reads,
    by wrapping those calls (the harness's own instrumentation, not celld's)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.count: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def _timed(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        counters = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.thread_time() - start
                with counters._lock:
                    counters.cpu[label] += spent
                    counters.count[label] += 1

        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original))

    def _counted(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        counters = self

        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            counters.count[label] += 1
            return await original(*args, **kwargs)

        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original))

    def install(self) -> None:
        self._timed(Isolate, "_load_sync", "isolate_create")
        self._timed(Isolate, "_turn_sync", "turn")
        self._timed(SqliteStore, "_commit", "commit")
        self._counted(SqliteStore, "_fetch", "read")  # a read: one trip to the reader thread
        self._counted(SqliteStore, "_fetch_many", "read")

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()


def trim() -> None:
    """Give freed memory back (glibc; the harness reads /proc, so Linux only anyway)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)


async def rss_sampler(peak: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], rss_mb())
        with contextlib.suppress(TimeoutError):  # sample again
            await asyncio.wait_for(stop.wait(), 0.2)


# -- driving --------------------------------------------------------------------------------


async def start_service(state: Path, cells: CellSettings, project: Path = PROJECT) -> Service:
    config = load_config(find_config(project, None))
    service = Service(config, ServiceOptions(persist_to=state, cells=cells))
    await service.start()
    return service


async def create_batches(
    service: Service, items: list[tuple[str, Callable[[], int]]], concurrency: int
) -> None:
    """createBatch in chunks of CHUNK, `concurrency` batches in flight; each item's
    sleep_ms is computed when its batch is sent."""
    assert service.cells is not None
    binding = service.cells.ops["wf.binding"]
    chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]
    queue: asyncio.Queue[list[tuple[str, Callable[[], int]]]] = asyncio.Queue()
    for chunk in chunks:
        queue.put_nowait(chunk)

    async def worker() -> None:
        while not queue.empty():
            chunk = queue.get_nowait()
            instances = [
                {"id": i, "params": orjson.dumps({"sleep_ms": sleep()}).decode()}
                for i, sleep in chunk
            ]
            reply = await binding(
                {"workflow": WORKFLOW, "method": "createBatch", "instances": instances}
            )
            assert len(reply["ids"]) == len(chunk), reply

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def count_status(service: Service, status: str, workflow: str = WORKFLOW) -> int:
    assert service.store is not None
    store: Any = service.store
    rows = await store._fetch(
        "SELECT count(*) AS n FROM instances WHERE workflow = ? AND status = ?",
        (workflow, status),
    )
    return int(rows[0]["n"])


async def settled(
    service: Service, status: str, n: int, timeout: float, workflow: str = WORKFLOW
) -> None:
    """Until `n` instances have `status` and nothing is resident or queued."""
    cells = service.cells
    assert cells is not None
    deadline = time.monotonic() + timeout
    while True:
        quiet = not cells.run_queue_length and not cells.resident_count
        if quiet and await count_status(service, status, workflow) >= n:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"not settled: {await count_status(service, status, workflow)} {status}, "
                f"{cells.resident_count} resident, {cells.run_queue_length} queued"
            )
        await asyncio.sleep(0.05)


def start_figures(cells: Any) -> dict[str, Any]:
    """Runs started together (celld/cells/startbatch.py), where the checkout has them."""
    counts = getattr(cells, "start_counts", None)
    if counts is None:
        return {}
    return {
        "start batches": counts.batches,
        "runs per batch": counts.runs / max(1, counts.batches),
        "start turns per batch": counts.turns / max(1, counts.batches),
    }


def per_instance(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    kinds = sorted(set(before) | set(after))
    out = {k: (after.get(k, 0) - before.get(k, 0)) * 1000 / n for k in kinds}
    out["total"] = sum(out.values())
    return out


def show(title: str, figures: dict[str, Any]) -> None:
    print(title)
    for key, value in figures.items():
        if isinstance(value, float):
            print(f"  {key:<28} {value:,.3f}")
        else:
            print(f"  {key:<28} {value}")


# -- the two workloads ---------------------------------------------------------------------


async def create_workload(n: int, concurrency: int, profile: bool) -> None:
    counters = Counters()
    with tempfile.TemporaryDirectory(prefix="celld-create-cost-") as tmp:
        service = await start_service(Path(tmp), CellSettings())
        try:
            cells = service.cells
            assert cells is not None
            store: Any = service.store
            await asyncio.sleep(0.5)
            trim()
            base_rss = rss_mb()
            peak = [base_rss]
            stop = asyncio.Event()
            sampler = asyncio.create_task(rss_sampler(peak, stop))
            counters.install()
            commits0, rows0 = store.commits, store.rows_written
            cpu0 = thread_cpu()
            profiler = cProfile.Profile() if profile else None
            if profiler:
                profiler.enable()
            started = time.monotonic()
            items = [(f"c{i}", lambda: DAY_MS) for i in range(n)]
            await create_batches(service, items, concurrency)
            acked = time.monotonic() - started
            await settled(service, "waiting", n, timeout=max(120, n * 0.05))
            wall = time.monotonic() - started
            if profiler:
                profiler.disable()
            cpu1 = thread_cpu()
            counters.remove()
            stop.set()
            await sampler
            await asyncio.sleep(0.2)
            trim()
            figures: dict[str, Any] = {
                "instances": n,
                "acknowledged s": acked,
                "settled s": wall,
                "inst/s (settled)": n / wall,
                **{f"cpu ms/inst {k}": v for k, v in per_instance(cpu0, cpu1, n).items()},
                "isolates created": counters.count["isolate_create"],
                "ms/isolate create": 1000
                * counters.cpu["isolate_create"]
                / max(1, counters.count["isolate_create"]),
                "js ms/inst create": 1000 * counters.cpu["isolate_create"] / n,
                "js ms/inst turns": 1000 * counters.cpu["turn"] / n,
                "turns/inst": counters.count["turn"] / n,
                "commits": store.commits - commits0,
                "writer ms/inst commit": 1000 * counters.cpu["commit"] / n,
                "rows/inst": (store.rows_written - rows0) / n,
                "reads/inst": counters.count["read"] / n,
                "rss base MiB": base_rss,
                "rss peak MiB": peak[0],
                "rss after trim MiB": rss_mb(),
                "warm isolates kept": len(cells.isolates.warm),
                **start_figures(cells),
            }
            show(f"create: {n} day-long sleepers, createBatch x{CHUNK}, {concurrency} at once",
                 figures)  # fmt: skip
            if profiler:
                stats = pstats.Stats(profiler)
                stats.sort_stats("tottime").print_stats(25)
        finally:
            await service.stop()


async def wake_workload(n: int, concurrency: int, lead_s: float, profile: bool) -> None:
    """N instances of the test project's ScriptWorkflow: a step, `sleepUntil` one
    absolute deadline (the same for all), a step. Lateness: when the step after the sleep
    finished (the engine's own row) minus the deadline."""
    counters = Counters()
    with tempfile.TemporaryDirectory(prefix="celld-wake-cost-") as tmp:
        service = await start_service(Path(tmp), CellSettings(residency_ms=500), SCRIPTED)
        try:
            cells = service.cells
            assert cells is not None
            binding = cells.ops["wf.binding"]
            due_at = int(time.time() * 1000 + lead_s * 1000)
            ops = [{"do": "before"}, {"sleepUntil": "nap", "at": due_at}, {"do": "after"}]
            payload = orjson.dumps({"ops": ops}).decode()
            ids = [f"w{i}" for i in range(n)]
            started = time.monotonic()
            await asyncio.gather(
                *(
                    binding({"workflow": SCRIPT_WORKFLOW, "method": "createBatch",
                             "instances": [{"id": i, "params": payload}
                                           for i in ids[at : at + CHUNK]]})
                    for at in range(0, n, CHUNK)
                )
            )  # fmt: skip
            await settled(service, "waiting", n, timeout=lead_s, workflow=SCRIPT_WORKFLOW)
            print(f"created and hibernated {n} in {time.monotonic() - started:.1f} s")
            # every sleeper hibernated: measure from a second before they are due (the
            # preloads of the last half second before it included) until all completed
            await asyncio.sleep(max(0.0, due_at / 1000 - time.time() - 1))
            counters.install()
            fired0 = cells.alarms.fired
            cpu0 = thread_cpu()
            profiler = cProfile.Profile() if profile else None
            if profiler:
                profiler.enable()
            await settled(service, "complete", n, timeout=lead_s + 120, workflow=SCRIPT_WORKFLOW)
            if profiler:
                profiler.disable()
            cpu1 = thread_cpu()
            counters.remove()
            store: Any = service.store
            rows = await store._fetch(
                "SELECT finished_at FROM steps WHERE workflow = ? AND name = 'after'",
                (SCRIPT_WORKFLOW,),
            )
            late = sorted(int(r["finished_at"]) - due_at for r in rows)

            def pct(p: float) -> float:
                return float(late[min(len(late) - 1, int(len(late) * p / 100))])

            figures: dict[str, Any] = {
                "woken": len(late),
                "alarms fired": cells.alarms.fired - fired0,
                "late p50 ms": pct(50),
                "late p99 ms": pct(99),
                "late max ms": float(late[-1]),
                **{f"cpu ms/wake {k}": v for k, v in per_instance(cpu0, cpu1, n).items()},
                "isolates created": counters.count["isolate_create"],
                "js ms/wake turns": 1000 * counters.cpu["turn"] / n,
                "reads/wake": counters.count["read"] / n,
                "turns/wake": counters.count["turn"] / n,
                **start_figures(cells),
            }
            show(f"wake: {n} hibernated sleepers due at the same moment (residency 500 ms)",
                 figures)  # fmt: skip
            if profiler:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        finally:
            await service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["create", "wake"])
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4, help="createBatch calls at once")
    parser.add_argument("--lead", type=float, default=30.0, help="wake: seconds until due")
    parser.add_argument("--profile", action="store_true", help="cProfile the event loop")
    args = parser.parse_args()
    if args.workload == "create":
        asyncio.run(create_workload(args.n or 5000, args.concurrency, args.profile))
    else:
        asyncio.run(wake_workload(args.n or 1000, args.concurrency, args.lead, args.profile))


if __name__ == "__main__":
    main()
