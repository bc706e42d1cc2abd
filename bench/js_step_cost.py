"""The JavaScript of one workflow step, alone: one isolate, a host that answers at once.

    nice -n 10 python bench/js_step_cost.py [-k 2000] [--repeat 5] [--isolates 1] [--jobs]

One warm workflow isolate (the runtime and bench/project's Worker, as the cells load it)
runs `BenchWorkflow` with K steps on the calling thread through the direct calls of
celld/isolate/native.py. The harness answers each bridge message itself, as the engine
would for steps that succeed at once (`wf.do` -> run attempt 1, `wf.attempt` -> resolve
with the value), so nothing but the JS of a step and the bridge is priced:

* thread CPU (`time.thread_time()`) inside delivering the inbox, running the pending jobs
  and taking the outbox, per step (median of `--repeat` runs);
* promise jobs, turns and messages each way per step;
* with `--jobs`, CPU of each job position within a step's turn (the jobs timed one by one,
  so each figure carries one clock read more);
* with `--isolates M`, M isolates each run an instance and their turns alternate, as the
  event loop interleaves many instances: what a step's JS costs once the caches hold other
  isolates' memory between two of its turns.

Figures are CPU, not wall time: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from celld.isolate.isolate import Isolate, _dumps  # noqa: E402
from celld.isolate.native import NativeBridge  # noqa: E402
from celld.isolate.threads import JS_STACK_LIMIT_BYTES  # noqa: E402
from celld.project.config import find_config, load_config  # noqa: E402
from celld.server.service import Service, ServiceOptions  # noqa: E402

PROJECT = ROOT / "bench" / "project"
CLOCK = time.thread_time


def start_message(k: int, generation: int) -> dict[str, Any]:
    """`wf.start` of a fresh BenchWorkflow instance with K steps (as CellRun sends it)."""
    return {
        "k": "wf.start",
        "g": generation,
        "className": "BenchWorkflow",
        "event": {
            "payload": orjson.dumps({"steps": k}).decode(),
            "timestamp": 0,
            "instanceId": f"js-{generation}",
            "workflowName": "bench-workflow",
            "schedule": None,
        },
        "journal": "{}",
        "unfinished": [],
        "stepLimit": 100_000,
        "speculate": True,
        "rollback": None,
        "checkVersion": False,
    }


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """What the engine would post back for `message` (None: nothing)."""
    op = message.get("op")
    if op == "wf.do":
        config = {"retries": {"limit": 5, "delay": 10000, "backoff": "exponential"},
                  "timeout": "10 minutes"}  # fmt: skip
        run = {
            "attempt": 1,
            "context": {
                "step": {"name": message["name"], "count": message["count"]},
                "attempt": 1,
                "config": config,
            },  # fmt: skip
            "timeout": 600_000,
            "willRetry": True,
        }
        return {"k": "settle", "t": message["t"], "v": {"run": run}}
    if op == "wf.attempt":
        if not message.get("ok"):
            raise RuntimeError(f"a step failed: {message}")
        return {"k": "settle", "t": message["t"], "v": {"resolve": message["value"]}}
    if op in ("wf.begin", "wf.done", "log"):
        return None
    raise RuntimeError(f"unexpected message {message}")


class Meter:
    def __init__(self) -> None:
        self.cpu = {"deliver": 0.0, "jobs": 0.0, "take": 0.0}
        self.jobs = 0
        self.turns = 0
        self.inbound = 0
        self.outbound = 0
        #: CPU of the i-th job of a turn (with --jobs)
        self.by_position: dict[int, list[float]] = {}


def run_turns(
    bridge: NativeBridge, meter: Meter, k: int, generation: int, per_job: bool
) -> Iterator[Any]:
    """Drive one instance to its end, one turn per iteration; yields None after each turn
    and its `wf.done` message at the end."""
    lib, runtime = bridge._lib, bridge.runtime
    execute = lib.execute_pending_job
    job_context = ctypes.c_void_p()
    out = ctypes.byref(job_context)
    inbox: list[dict[str, Any]] = [{"k": "reset"}, start_message(k, generation)]
    done = None
    while done is None:
        if not inbox:
            raise RuntimeError("the run stopped without finishing")
        payload = _dumps(inbox)
        meter.turns += 1
        meter.inbound += len(inbox)
        before = CLOCK()
        bridge.deliver(payload)
        after = CLOCK()
        meter.cpu["deliver"] += after - before
        position = 0
        while True:
            start = CLOCK() if per_job else 0.0
            ran = execute(runtime, out)
            if ran <= 0:
                if ran < 0:
                    bridge._raise_pending()
                break
            if per_job:
                meter.by_position.setdefault(position, []).append(CLOCK() - start)
                position += 1
            meter.jobs += 1
        meter.cpu["jobs"] += CLOCK() - after
        before = CLOCK()
        text = bridge.take()
        meter.cpu["take"] += CLOCK() - before
        outbox = orjson.loads(text)
        meter.outbound += len(outbox)
        inbox = []
        for message in outbox:
            if message.get("op") == "wf.done":
                done = message
            reply = answer(message)
            if reply is not None:
                inbox.append(reply)
        if done is None:
            yield None
    yield done


def run_round(bridges: list[NativeBridge], k: int, generation: int, per_job: bool) -> Meter:
    """One instance of K steps in each isolate, their turns taken in turn (as the event
    loop interleaves the runs of many instances); what all of it cost."""
    meter = Meter()
    runs = [run_turns(bridge, meter, k, generation, per_job) for bridge in bridges]
    while runs:
        still = []
        for run in runs:
            outcome = next(run)
            if outcome is None:
                still.append(run)
            elif "output" not in outcome:
                raise RuntimeError(f"the run failed: {outcome}")
        runs = still
    return meter


async def measure(args: argparse.Namespace) -> None:
    config = load_config(find_config(PROJECT, None))
    with tempfile.TemporaryDirectory(prefix="celld-js-step-") as state:
        service = Service(config, ServiceOptions(persist_to=Path(state), js_threads=1))
        await service.start()
        try:
            manager = service.cells
            assert manager is not None
            isolates: list[Isolate] = []
            try:
                for _ in range(args.isolates):
                    isolate, _ = await manager.take_isolate()
                    isolates.append(isolate)
                    await isolate.turn([{"k": "env", **manager.settings.env_message}])
                bridges = [isolate._native for isolate in isolates]
                if any(bridge is None for bridge in bridges):
                    raise SystemExit("no direct calls into QuickJS with this binding")

                def drive() -> list[Meter]:
                    for bridge in bridges:
                        bridge.enter(JS_STACK_LIMIT_BYTES)
                    meters = []
                    for generation in range(2, args.repeat + 3):
                        meters.append(run_round(bridges, args.k, generation, args.jobs))
                    return meters[1:]  # the first round warms up

                meters = await isolates[0].thread.run(drive)
            finally:
                for isolate in isolates:
                    await isolate.close()
        finally:
            await service.stop()
    k = args.k * args.isolates
    per = {name: statistics.median(m.cpu[name] for m in meters) / k * 1e6 for name in meters[0].cpu}
    m = meters[-1]
    print(
        f"BenchWorkflow, K={args.k} in each of {args.isolates} isolate(s), turns interleaved, "
        f"{len(meters)} rounds (medians), direct calls, answered at once"
    )
    print(
        f"JS per step (us): deliver {per['deliver']:.1f}, jobs {per['jobs']:.1f}, "
        f"take {per['take']:.1f}, all {sum(per.values()):.1f}"
    )
    print(
        f"per step: {m.jobs / k:.2f} promise jobs, {m.turns / k:.2f} turns, "
        f"{m.inbound / k:.2f} messages in, {m.outbound / k:.2f} out"
    )
    if args.jobs:
        for position in sorted(m.by_position):
            samples = [x for meter in meters for x in meter.by_position.get(position, [])]
            print(
                f"  job {position}: {statistics.median(samples) * 1e6:6.2f} us median, "
                f"{statistics.mean(samples) * 1e6:6.2f} mean ({len(samples)} samples)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-k", type=int, default=2000, help="steps per run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--isolates", type=int, default=1, help="instances side by side")
    parser.add_argument("--jobs", action="store_true", help="time each job of a turn")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
