"""The loop's cost of a resident wake-up, measured in one process on a manual clock.

`n` `SleeperWorkflow` instances (bench/project) run to a sleep of ten minutes, inside the
residency window, so they stay resident with their runs parked. The harness then moves
the manual clock past every deadline at once and measures, until every instance has
completed (the wake-up, its resolved sleep, the step after it and the run's end):

* event-loop thread CPU per wake-up (`time.thread_time()`), process CPU per wake-up;
* event-loop callbacks per wake-up (every `asyncio.Handle` the loop ran);
* how long after the clock moved the step after each sleep began (wall ms: the in-process
  wake lag of `n` sleeps due at once, without HTTP or a driver), and each completed.

Usage: python bench/wake_cost.py [-n 1000] [--profile 30]
"""

from __future__ import annotations

import argparse
import asyncio
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

from bench.step_cost import CallbackCounter  # noqa: E402
from celld.cells.clock import ManualClock  # noqa: E402
from celld.cells.manager import CellSettings  # noqa: E402
from celld.engine import Machine  # noqa: E402
from celld.project.config import find_config, load_config  # noqa: E402
from celld.server.service import Service, ServiceOptions  # noqa: E402
from celld.store.base import InstanceRef  # noqa: E402

PROJECT = ROOT / "bench" / "project"
WORKFLOW = "sleeper-workflow"
SLEEP_MS = 600_000


async def _until(condition: Any, what: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        await asyncio.sleep(0.02)
        if time.monotonic() > deadline:
            raise SystemExit(f"never: {what}")


async def measure(args: argparse.Namespace) -> None:
    config = load_config(find_config(PROJECT, None))
    clock = ManualClock(1_700_000_000_000)
    with tempfile.TemporaryDirectory(prefix="celld-wake-cost-") as state:
        options = ServiceOptions(persist_to=Path(state), js_threads=2, clock=clock)
        options.cells = CellSettings(max_resident=args.n + 64)  # every sleeper stays resident
        service = Service(config, options)
        await service.start()
        try:
            cells: Any = service.cells
            refs = [InstanceRef(WORKFLOW, f"w{i}") for i in range(args.n)]
            payload = orjson.dumps({"sleep_ms": SLEEP_MS}).decode()
            for start in range(0, args.n, 100):
                batch = [{"id": r.id, "params": payload} for r in refs[start : start + 100]]
                await cells.ops["wf.binding"](
                    {"workflow": WORKFLOW, "method": "createBatch", "instances": batch}
                )

            def parked() -> bool:
                return all((c := cells.loaded(r)) is not None and c.parked for r in refs)

            await _until(parked, "every sleeper parked, resident")
            await asyncio.sleep(0.5)  # the last commits and idle passes settle
            # when each instance's completion was committed (seen on its way to the store,
            # so the harness adds no loop work of its own while the wake-ups run)
            finished: dict[InstanceRef, float] = {}
            commit_soon = cells.commit_soon

            writes = [0]

            def committing(write: Any, done: Any) -> None:
                writes[0] += 1
                instance = write.changes.instance
                if instance is not None and instance.status == "complete":
                    commit_soon(
                        write,
                        lambda error: (
                            done(error),
                            finished.setdefault(write.ref, time.perf_counter()),
                        ),
                    )
                else:
                    commit_soon(write, done)

            cells.commit_soon = committing
            # when the step after the sleep began (JS reports it as it starts the step, or
            # asks to): the bench's wake lag, as the workflow's own clock would see it
            began: dict[str, float] = {}
            step_do = Machine.step_do

            def begun(machine: Machine, name: str, *rest: Any, **kw: Any) -> Any:
                began.setdefault(machine.state.id, time.perf_counter())
                return step_do(machine, name, *rest, **kw)

            Machine.step_do = begun  # type: ignore[method-assign]
            profile = cProfile.Profile(time.thread_time) if args.profile else None
            with CallbackCounter() as callbacks:
                if profile is not None:
                    profile.enable()
                commits0 = service.store.commits  # type: ignore[union-attr]
                loop0, proc0, wall0 = time.thread_time(), time.process_time(), time.perf_counter()
                clock.advance(SLEEP_MS)

                def done() -> bool:
                    return len(finished) == len(refs)

                await _until(done, "every sleeper completed")
                loop1, proc1 = time.thread_time(), time.process_time()
                commits = service.store.commits - commits0  # type: ignore[union-attr]
                if profile is not None:
                    profile.disable()
            del cells.commit_soon
            Machine.step_do = step_do  # type: ignore[method-assign]
            statuses = await asyncio.gather(
                *(cells.ops["wf.binding"]({"workflow": WORKFLOW, "method": "status", "id": r.id})
                  for r in refs)
            )  # fmt: skip
            if any(s["status"] != "complete" for s in statuses):
                raise SystemExit("a sleeper did not complete")
        finally:
            await service.stop()
    n = args.n
    lags = sorted((finished[r] - wall0) * 1000 for r in refs)
    woke = sorted((began[r.id] - wall0) * 1000 for r in refs)
    print(f"wake-ups: {n} resident sleepers due at once (manual clock)")
    print(f"event-loop thread CPU per wake-up: {(loop1 - loop0) / n * 1e6:8.1f} us")
    print(f"process CPU per wake-up:           {(proc1 - proc0) / n * 1e6:8.1f} us")
    print(f"loop callbacks per wake-up:        {callbacks.count / n:8.2f}")
    print(f"instance writes per wake-up:       {writes[0] / n:8.2f} ({commits} group commits)")
    print(
        f"the step after the sleep began: p50 {statistics.median(woke):.0f} ms, "
        f"p99 {woke[int(n * 0.99) - 1]:.0f} ms, max {woke[-1]:.0f} ms (wall: noise here)"
    )
    print(
        f"completed after the clock moved: p50 {statistics.median(lags):.0f} ms, "
        f"p99 {lags[int(n * 0.99) - 1]:.0f} ms, max {lags[-1]:.0f} ms (wall: noise here)"
    )
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(args.sort).print_stats(args.profile)
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sort", default="tottime", help="profile: by own time, or cumulative")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions")
    parser.add_argument("-n", type=int, default=1000, help="sleepers")
    args = parser.parse_args()
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
