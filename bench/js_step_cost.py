"""The JavaScript of one workflow step, alone: one isolate, a host that answers at once.

    nice -n 10 python bench/js_step_cost.py [-k 2000] [--repeat 5] [--jobs]

One warm workflow isolate (the runtime and bench/project's Worker, as the cells load it)
runs `BenchWorkflow` with K steps on the calling thread through the direct calls of
celld/isolate/native.py. The harness answers each bridge message itself, as the engine
would for steps that succeed at once (`wf.do` -> run attempt 1, `wf.attempt` -> resolve
with the value), so nothing but the JS of a step and the bridge is priced:

* thread CPU (`time.thread_time()`) inside delivering the inbox, running the pending jobs
  and taking the outbox, per step (median of `--repeat` runs);
* promise jobs, turns and messages each way per step;
* with `--jobs`, CPU of each job position within a step's turn (the jobs timed one by one,
  so each figure carries one clock read more).

Figures are CPU, not wall time: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
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


def run_one(bridge: NativeBridge, k: int, generation: int, per_job: bool) -> tuple[Meter, Any]:
    """Drive one instance to its end; what it cost and its `wf.done` message."""
    meter = Meter()
    lib, runtime = bridge._lib, bridge.runtime
    execute = lib.execute_pending_job
    import ctypes

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
        if per_job:
            while True:
                start = CLOCK()
                ran = execute(runtime, out)
                end = CLOCK()
                if ran <= 0:
                    if ran < 0:
                        bridge._raise_pending()
                    break
                meter.by_position.setdefault(position, []).append(end - start)
                position += 1
                meter.jobs += 1
            meter.cpu["jobs"] += CLOCK() - after
        else:
            while True:
                ran = execute(runtime, out)
                if ran <= 0:
                    if ran < 0:
                        bridge._raise_pending()
                    break
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
    return meter, done


async def measure(args: argparse.Namespace) -> None:
    config = load_config(find_config(PROJECT, None))
    with tempfile.TemporaryDirectory(prefix="celld-js-step-") as state:
        service = Service(config, ServiceOptions(persist_to=Path(state), js_threads=1))
        await service.start()
        try:
            manager = service.cells
            assert manager is not None
            isolate: Isolate
            isolate, _ = await manager.take_isolate()
            try:
                await isolate.turn([{"k": "env", **manager.settings.env_message}])
                bridge = isolate._native
                if bridge is None:
                    raise SystemExit("no direct calls into QuickJS with this binding")

                def drive() -> list[Meter]:
                    bridge.enter(JS_STACK_LIMIT_BYTES)
                    meters = []
                    for generation in range(2, args.repeat + 3):
                        meter, done = run_one(bridge, args.k, generation, args.jobs)
                        if "output" not in done:
                            raise RuntimeError(f"the run failed: {done}")
                        meters.append(meter)
                    return meters[1:]  # the first run warms up

                meters = await isolate.thread.run(drive)
            finally:
                await isolate.close()
        finally:
            await service.stop()
    k = args.k
    per = {name: statistics.median(m.cpu[name] for m in meters) / k * 1e6 for name in meters[0].cpu}
    m = meters[-1]
    print(f"BenchWorkflow, K={k}, {len(meters)} runs (medians), direct calls, answered at once")
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
    parser.add_argument("--jobs", action="store_true", help="time each job of a turn")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
