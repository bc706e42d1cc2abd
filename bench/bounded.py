"""Bounded-resource figures for the cells layer, measured in process (real isolates,
real SQLite, synchronous=FULL), printed as a table:

* `long`: one instance running a very long workflow (default 100,000 steps of
  `LongWorkflow`, its step limit lifted past the config's 25,000 cap for the test).
  Every few seconds: steps done, RSS, background tasks of the cells layer, pending host
  tasks of the run's isolate, asyncio tasks, the isolate's own JS heap. Flat columns mean
  nothing is left behind per step.
* `burst`: 50,000 `create()` calls from 200 concurrent callers (instances of
  `LongWorkflow` with one step and then a sleep of a day, so each hibernates after its
  first step). RSS and queue figures sampled every 0.5 s while the burst is admitted and runs.

    python bench/bounded.py long --steps 100000
    python bench/bounded.py burst --creates 50000 --max-resident 64
    python bench/bounded.py startup --instances 1000000 --seconds 60

* `startup`: that many runnable (queued) instances written to a fresh store, then a
  service started on it: RSS, run queue and loaded cells while it pages them in.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from celld.cells.manager import CellSettings  # noqa: E402
from celld.server.service import Service  # noqa: E402
from celld.store.base import InstanceRef  # noqa: E402
from tests.inprocess import call, params, running_service  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def host_tasks(service: Service) -> int:
    assert service.cells is not None
    return sum(
        len(cell.run.host._tasks)  # noqa: SLF001 - a benchmark looks inside
        for cell in service.cells.residency.resident_cells()
        if cell.run is not None
    )


async def js_heap_mb(service: Service) -> float:
    return (await service.cells.isolate_memory()) / 2**20 if service.cells else 0.0


async def long_run(steps: int, every: float) -> None:
    with tempfile.TemporaryDirectory(prefix="celld-bench-") as folder:
        async with running_service(
            Path(folder) / "state", step_limits={"long-workflow": steps + 10}
        ) as service:
            assert service.cells is not None
            await call(service, "long-workflow", "create", id="long",
                       params=params({"steps": steps}))  # fmt: skip
            started = time.monotonic()
            print(
                "| s | steps done | steps/s | RSS MiB | cell tasks | host tasks "
                "| asyncio tasks | JS heap MiB |"
            )
            print("|---|---|---|---|---|---|---|---|")
            last_done, last_t = 0, started
            while True:
                await asyncio.sleep(every)
                status = await call(service, "long-workflow", "status", id="long")
                cell = service.cells.loaded(InstanceRef("long-workflow", "long"))
                done = cell.machine.state.next_seq - 1 if cell is not None else steps
                now = time.monotonic()
                rate = (done - last_done) / (now - last_t)
                last_done, last_t = done, now
                print(
                    f"| {now - started:.0f} | {done} | {rate:.0f} | {rss_mb():.0f} | "
                    f"{len(service.cells.tasks)} | {host_tasks(service)} | "
                    f"{len(asyncio.all_tasks())} | {await js_heap_mb(service):.1f} |",
                    flush=True,
                )
                if status["status"] in ("complete", "errored", "terminated"):
                    print(
                        f"\nfinal: {status['status']} {status.get('output') or status.get('error')}"
                    )
                    return


async def burst(creates: int, concurrency: int, max_resident: int, every: float) -> None:
    with tempfile.TemporaryDirectory(prefix="celld-bench-") as folder:
        settings = CellSettings(max_resident=max_resident)
        async with running_service(Path(folder) / "state", cells=settings) as service:
            assert service.cells is not None and service.store is not None
            baseline = rss_mb()
            next_id = iter(range(creates))
            created = 0

            sleeper = params({"steps": 1, "sleepEvery": 1, "nap": "1 day"})

            async def caller() -> None:
                nonlocal created
                for n in next_id:
                    await call(service, "long-workflow", "create", id=f"b{n}", params=sleeper)
                    created += 1

            started = time.monotonic()
            callers = [asyncio.ensure_future(caller()) for _ in range(concurrency)]
            peak = baseline
            print(f"baseline RSS {baseline:.0f} MiB, max_resident {max_resident}\n")
            print(
                "| s | created | run queue | resident | loaded cells | RSS MiB | waiting (store) |"
            )
            print("|---|---|---|---|---|---|---|")
            while True:
                await asyncio.sleep(every)
                counts = await service.store.counts()
                rss = rss_mb()
                peak = max(peak, rss)
                print(
                    f"| {time.monotonic() - started:.1f} | {created} | "
                    f"{service.cells.run_queue_length} | {service.cells.resident_count} | "
                    f"{len(service.cells.cells)} | {rss:.0f} | {counts.get('waiting', 0)} |",
                    flush=True,
                )
                if all(c.done() for c in callers) and counts.get("waiting", 0) >= creates:
                    break
            for task in callers:
                task.result()
            print(f"\npeak RSS {peak:.0f} MiB ({peak - baseline:.0f} MiB over baseline), "
                  f"{creates} instances created and run to their sleep in "
                  f"{time.monotonic() - started:.1f} s")  # fmt: skip


async def startup(instances: int, seconds: float, max_resident: int, every: float) -> None:
    from celld.engine import Machine
    from celld.store.base import Write
    from celld.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory(prefix="celld-bench-") as folder:
        state = Path(folder) / "state"
        store = SqliteStore(state / "celld.sqlite3")
        await store.open()
        began = time.monotonic()
        payload = params({"steps": 1})
        for start in range(0, instances, 10_000):
            writes = []
            for n in range(start, min(instances, start + 10_000)):
                machine = Machine.create("long-workflow", f"i{n:07}", payload, 1_700_000_000_000)
                writes.append(Write(InstanceRef("long-workflow", machine.state.id),
                                    machine.take_changes(), None, True))  # fmt: skip
            await store.write_many(writes)
        await store.close()
        print(f"{instances} queued instances written in {time.monotonic() - began:.0f} s\n")
        settings = CellSettings(max_resident=max_resident)
        baseline = rss_mb()
        began = time.monotonic()
        async with running_service(state, cells=settings) as service:
            assert service.cells is not None and service.store is not None
            started_in = time.monotonic() - began
            print(f"serving {started_in:.2f} s after start; RSS before start {baseline:.0f} MiB")
            print("| s | complete | run queue | loaded cells | RSS MiB |")
            print("|---|---|---|---|---|")
            while time.monotonic() - began < seconds:
                await asyncio.sleep(every)
                complete = (await service.store.counts()).get("complete", 0)
                print(
                    f"| {time.monotonic() - began:.0f} | {complete} | "
                    f"{service.cells.run_queue_length} | {len(service.cells.cells)} | "
                    f"{rss_mb():.0f} |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    long_parser = sub.add_parser("long")
    long_parser.add_argument("--steps", type=int, default=100_000)
    long_parser.add_argument("--every", type=float, default=10.0)
    burst_parser = sub.add_parser("burst")
    burst_parser.add_argument("--creates", type=int, default=50_000)
    burst_parser.add_argument("--concurrency", type=int, default=200)
    burst_parser.add_argument("--max-resident", type=int, default=64)
    burst_parser.add_argument("--every", type=float, default=0.5)
    startup_parser = sub.add_parser("startup")
    startup_parser.add_argument("--instances", type=int, default=1_000_000)
    startup_parser.add_argument("--seconds", type=float, default=60)
    startup_parser.add_argument("--max-resident", type=int, default=64)
    startup_parser.add_argument("--every", type=float, default=5)
    args = parser.parse_args()
    os.environ.setdefault("CELLD_SQLITE_SYNC", "FULL")
    if args.what == "long":
        asyncio.run(long_run(args.steps, args.every))
    elif args.what == "startup":
        asyncio.run(startup(args.instances, args.seconds, args.max_resident, args.every))
    else:
        asyncio.run(burst(args.creates, args.concurrency, args.max_resident, args.every))


if __name__ == "__main__":
    main()
