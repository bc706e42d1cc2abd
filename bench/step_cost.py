"""Python CPU per workflow step on the event-loop thread, measured in one process.

The `Service` runs inside this process (real QuickJS isolates, a real SQLite file with
synchronous=FULL), instances of `BenchWorkflow` (bench/project) are created through the
Workflow binding's own host operation, and the harness reports, for the steps they run:

* CPU of the event-loop thread per step (`time.thread_time()` on that thread), and of the
  whole process per step (`time.process_time()`: JS threads and the SQLite writer too);
* event-loop callbacks per step (every `asyncio.Handle` the loop ran, Task steps included);
* commits per step (the store's group commits);
* with `--profile`, cProfile's top entries for the event-loop thread;
* with `--js`, the JavaScript of those steps: thread CPU inside the direct calls into
  QuickJS (celld/isolate/native.py: delivering the inbox, running pending jobs, taking
  the outbox), and the promise jobs and bridge messages per step.

Wall-clock figures are printed too, but on a shared machine only the CPU and callback
counts compare between runs. Usage:

    python bench/step_cost.py                     # N=50 instances x K=100 steps, C=20
    python bench/step_cost.py -n 200 -k 10        # the 10-step workload
    python bench/step_cost.py --serial 20 -k 10   # one at a time: create-to-complete
    python bench/step_cost.py --wake 1000         # 1,000 sleeps of 2 s due at once
    python bench/step_cost.py --profile 25        # and the 25 costliest functions
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from celld.isolate import native  # noqa: E402
from celld.project.config import find_config, load_config  # noqa: E402
from celld.server.service import Service, ServiceOptions  # noqa: E402
from celld.store.base import InstanceRef  # noqa: E402

PROJECT = ROOT / "bench" / "project"
WORKFLOW = "bench-workflow"


class CallbackCounter:
    """Counts the callbacks the event loop runs (Handle._run is pure Python in asyncio)."""

    def __init__(self) -> None:
        self.count = 0
        self._original: Any = None

    def __enter__(self) -> CallbackCounter:
        self._original = asyncio.events.Handle._run
        original = self._original
        counter = self

        def counted(handle: asyncio.events.Handle) -> None:
            counter.count += 1
            original(handle)

        asyncio.events.Handle._run = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]


async def _binding(service: Service, method: str, **fields: Any) -> Any:
    assert service.cells is not None
    return await service.cells.ops["wf.binding"]({"workflow": WORKFLOW, "method": method, **fields})


async def _finished(service: Service, ids: list[str], workflow: str) -> dict[str, Any]:
    """Outputs of finished instances, read straight from the store (one query)."""
    store: Any = service.cells.store if service.cells else None
    marks = ",".join("?" * len(ids))
    rows = await store._fetch(
        f"SELECT id, status, output FROM instances WHERE workflow = ? AND id IN ({marks})",
        (workflow, *ids),
    )
    done = {}
    for row in rows:
        if row["status"] in ("complete", "errored", "terminated"):
            if row["status"] != "complete":
                raise SystemExit(f"instance {row['id']} ended {row['status']}")
            done[row["id"]] = orjson.loads(row["output"]) if row["output"] else None
    return done


async def _wait_all(
    service: Service, ids: list[str], poll_s: float, workflow: str = WORKFLOW
) -> dict[str, Any]:
    while True:
        done = await _finished(service, ids, workflow)
        if len(done) == len(ids):
            return done
        await asyncio.sleep(poll_s)


async def _throughput(service: Service, n: int, k: int, c: int) -> None:
    ids = [f"i{i}" for i in range(n)]
    payload = orjson.dumps({"steps": k}).decode()
    gate = asyncio.Semaphore(c)

    async def create(instance_id: str) -> None:
        async with gate:
            await _binding(service, "create", id=instance_id, params=payload)

    await asyncio.gather(*(create(i) for i in ids))
    await _wait_all(service, ids, 0.2)


async def _serial(service: Service, n: int, k: int) -> list[float]:
    """Create-to-complete of one instance at a time (ms, from the workflow's own clock).
    Completion is noticed through the log hub (woken by each commit that logs), so no
    polling adds to the loop's work."""
    assert service.cells is not None
    payload = orjson.dumps({"steps": k}).decode()
    spans = []
    for i in range(n):
        ref = InstanceRef(WORKFLOW, f"s{i}")
        sent = time.time() * 1000
        await _binding(service, "create", id=ref.id, params=payload)
        while True:
            cell = service.cells.loaded(ref)
            if cell is None or cell.snapshot.get("status") in ("complete", "errored"):
                done = await _finished(service, [ref.id], WORKFLOW)
                if done:
                    break
            await service.cells.log_hub.wait(ref, 0.05)
        spans.append(done[ref.id]["finished_at"] - sent)
    return spans


async def _wake(service: Service, n: int, sleep_ms: int) -> list[float]:
    """`n` SleeperWorkflow instances created at once sleep `sleep_ms`; how late each woke
    (ms: the step after the sleep ran that long after the sleep's end)."""
    ids = [f"w{i}" for i in range(n)]
    payload = orjson.dumps({"sleep_ms": sleep_ms}).decode()
    for start in range(0, n, 100):
        await service.cells.ops["wf.binding"](  # type: ignore[union-attr]
            {"workflow": "sleeper-workflow", "method": "createBatch",
             "instances": [{"id": i, "params": payload} for i in ids[start:start + 100]]}
        )  # fmt: skip
    done = await _wait_all(service, ids, 0.2, workflow="sleeper-workflow")
    return [done[i]["late_ms"] for i in ids]


class JsMeter:
    """CPU (thread time) inside NativeBridge's calls into QuickJS, jobs run and messages
    each way, while installed. The counting wrapper around each job costs a few tenths of
    a us of its own, which is in the jobs' figure."""

    def __init__(self) -> None:
        self.cpu = {"deliver": 0.0, "jobs": 0.0, "take": 0.0}
        self.jobs = 0
        self.inbound = 0  # messages delivered
        self.outbound = 0  # messages taken
        self.turns = 0
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> JsMeter:
        bridge = native.NativeBridge
        meter = self
        self._saved = {name: getattr(bridge, name) for name in ("deliver", "run_jobs", "take")}
        deliver, run_jobs, take = (self._saved[n] for n in ("deliver", "run_jobs", "take"))
        clock = time.thread_time

        def timed_deliver(self: Any, payload: bytes) -> None:
            meter.turns += 1
            meter.inbound += len(orjson.loads(payload))
            before = clock()
            try:
                deliver(self, payload)
            finally:
                meter.cpu["deliver"] += clock() - before

        def timed_run_jobs(self: Any, limit: int) -> bool:
            lib = self._lib
            execute = lib.execute_pending_job

            def counted(*args: Any) -> int:
                ran = execute(*args)
                if ran > 0:
                    meter.jobs += 1
                return ran

            lib.execute_pending_job = counted
            before = clock()
            try:
                return run_jobs(self, limit)
            finally:
                meter.cpu["jobs"] += clock() - before
                lib.execute_pending_job = execute

        def timed_take(self: Any) -> bytes:
            before = clock()
            try:
                out = take(self)
            finally:
                meter.cpu["take"] += clock() - before
            meter.outbound += len(orjson.loads(out))
            return out

        bridge.deliver = timed_deliver  # type: ignore[method-assign]
        bridge.run_jobs = timed_run_jobs  # type: ignore[method-assign]
        bridge.take = timed_take  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        for name, original in self._saved.items():
            setattr(native.NativeBridge, name, original)

    def report(self, steps: int) -> str:
        per = {name: cpu / steps * 1e6 for name, cpu in self.cpu.items()}
        return "\n".join(
            [
                f"JS per step (us): deliver {per['deliver']:.1f}, jobs {per['jobs']:.1f}, "
                f"take {per['take']:.1f}, all {sum(per.values()):.1f}",
                f"per step: {self.jobs / steps:.2f} promise jobs, {self.turns / steps:.2f} "
                f"deliveries, {self.inbound / steps:.2f} messages in, "
                f"{self.outbound / steps:.2f} out",
            ]
        )


async def measure(args: argparse.Namespace) -> None:
    config = load_config(find_config(PROJECT, None))
    with tempfile.TemporaryDirectory(prefix="celld-step-cost-") as state:
        service = Service(config, ServiceOptions(persist_to=Path(state), js_threads=args.threads))
        await service.start()
        try:
            # warm up: the Worker loads, a first instance runs (not measured)
            await _binding(service, "create", id="warm", params='{"steps": 2}')
            await _wait_all(service, ["warm"], 0.05)
            store: Any = service.cells.store if service.cells else None
            commits0 = store.commits
            profile = cProfile.Profile(time.thread_time) if args.profile else None  # CPU, not wall
            meter = JsMeter() if args.js else None
            with CallbackCounter() as callbacks, meter or contextlib.nullcontext():
                loop0, proc0, wall0 = time.thread_time(), time.process_time(), time.perf_counter()
                if profile is not None:
                    profile.enable()
                if args.wake:
                    spans = await _wake(service, args.wake, args.sleep_ms)
                    steps = args.wake * 2
                elif args.serial:
                    spans = await _serial(service, args.serial, args.k)
                    steps = args.serial * args.k
                else:
                    await _throughput(service, args.n, args.k, args.c)
                    steps = args.n * args.k
                if profile is not None:
                    profile.disable()
                loop1, proc1, wall1 = time.thread_time(), time.process_time(), time.perf_counter()
            commits = store.commits - commits0
        finally:
            await service.stop()
    what = (
        f"wake: {args.wake} sleepers of {args.sleep_ms} ms (2 steps each)"
        if args.wake
        else f"serial {args.serial} x K={args.k}"
        if args.serial
        else (f"N={args.n} x K={args.k}, C={args.c}")
    )
    print(f"workload: {what}, {steps} steps, js_threads={args.threads}")
    print(f"event-loop thread CPU per step: {(loop1 - loop0) / steps * 1e6:8.1f} us")
    print(f"process CPU per step:           {(proc1 - proc0) / steps * 1e6:8.1f} us")
    print(f"loop callbacks per step:        {callbacks.count / steps:8.2f}")
    print(f"commits per step:               {commits / steps:8.3f}")
    print(f"wall: {wall1 - wall0:.2f} s, {steps / (wall1 - wall0):.0f} steps/s (noise here)")
    if args.wake:
        spans.sort()
        print(
            f"wake lateness p50 {statistics.median(spans):.0f} ms, "
            f"p99 {spans[int(len(spans) * 0.99) - 1]:.0f} ms, max {spans[-1]:.0f} ms "
            "(the 2 s of sleep are in the wall time)"
        )
    elif args.serial:
        print(
            f"create-to-complete p50 {statistics.median(spans):.1f} ms, "
            f"max {max(spans):.1f} ms (noise here)"
        )
    if meter is not None:
        print(meter.report(steps))
    if profile is not None:
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats(args.sort).print_stats(args.profile)
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=50, help="instances")
    parser.add_argument("-k", type=int, default=100, help="steps per instance")
    parser.add_argument("-c", type=int, default=20, help="concurrent creates")
    parser.add_argument("--serial", type=int, default=0, help="instances one at a time")
    parser.add_argument("--wake", type=int, default=0, help="sleepers woken at once")
    parser.add_argument("--sleep-ms", type=int, default=2000, help="their sleep")
    parser.add_argument("--threads", type=int, default=2, help="JS threads")
    parser.add_argument("--js", action="store_true", help="price the JS of the steps")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions")
    parser.add_argument("--sort", default="tottime", help="by own time, or cumulative")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
