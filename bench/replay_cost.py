"""What bringing back a hibernated instance costs, per recorded step, by component.

    nice -n 10 python bench/replay_cost.py [--steps 5000] [--repeat 5] [--e2e-repeat 3]
        [--state DIR]

Records `WaiterWorkflow` instances (bench/project) with 0 and K recorded steps waiting for
an event in a real SQLite store, in-process, once (kept in `--state` for the next run). Then:

* **components**: each stage of the load/start path run on its own, in order, as the cells
  run it, `--repeat` times; CPU (process time: the reader and JS threads included) of
  each, K minus K = 0, divided by K:
  store read (SQL + rows into records), engine (the machine built from the records and
  `start_run`), start message (the journal text and the message around it, its JSON
  encoding), JS (one turn that delivers `wf.start` and replays up to the wait; split into
  the message's JSON parse and the rest, run() replaying).
* **end to end**: the service restarted on a copy of the state, each instance sent its
  event alone; process CPU from the event to the instance's completion, K minus K = 0,
  divided by K (the bench's `replay` figure, as CPU instead of wall time); `--e2e-repeat`
  restarts (3 by default), each on a fresh copy, and their median.

Figures are CPU, not wall time: the machine is shared, so wall time is noise.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from celld.cells.manager import CellSettings  # noqa: E402
from celld.engine import Machine  # noqa: E402
from celld.isolate.isolate import Isolate, RawJson, _dumps  # noqa: E402
from celld.project.config import find_config, load_config  # noqa: E402
from celld.server.service import Service, ServiceOptions  # noqa: E402
from celld.store.base import InstanceRef  # noqa: E402

PROJECT = ROOT / "bench" / "project"
WORKFLOW = "waiter-workflow"
CPU = time.process_time
#: how often the end-to-end measurement asks whether the instance completed
E2E_POLL_S = 0.1
#: an instance with no recorded steps woken first, unmeasured
WARM_UP = "warm-up"


async def start_service(state: Path) -> Service:
    config = load_config(find_config(PROJECT, None))
    # a long residency window: nothing hibernates or wakes on its own while measured
    options = ServiceOptions(persist_to=state, js_threads=1, cells=CellSettings())
    service = Service(config, options)
    await service.start()
    return service


async def call(service: Service, method: str, **fields: Any) -> Any:
    assert service.cells is not None
    return await service.cells.ops["wf.binding"]({"workflow": WORKFLOW, "method": method, **fields})


async def wait_status(
    service: Service, instance_id: str, wanted: str, timeout: float, every: float = 0.005
) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = await call(service, "status", id=instance_id)
        if status.get("status") == wanted:
            return status
        if time.monotonic() > deadline:
            raise RuntimeError(f"{instance_id} is {status}, not {wanted}")
        await asyncio.sleep(every)


async def record(state: Path, sizes: list[int]) -> None:
    """Instances `k<K>` with K recorded steps, each waiting for its event (hibernated once
    the service stops)."""
    service = await start_service(state)
    try:
        for instance_id, k in [(WARM_UP, 0)] + [(f"k{k}", k) for k in sizes]:
            params = orjson.dumps({"steps": k}).decode()
            await call(service, "create", id=instance_id, params=params)
            await wait_status(service, instance_id, "waiting", 600)
            print(f"recorded {instance_id}", file=sys.stderr)
    finally:
        await service.stop()


def median_cpu(samples: list[float]) -> float:
    return statistics.median(samples)


async def timed(work: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, Any]:
    """Median process CPU (s) of `work` over `repeat` runs, and its last result."""
    samples = []
    result = None
    for _ in range(repeat):
        before = CPU()
        result = await work()
        samples.append(CPU() - before)
    return median_cpu(samples), result


async def components(state: Path, sizes: list[int], repeat: int) -> dict[int, dict[str, float]]:
    """CPU seconds of each stage for each K (medians)."""
    service = await start_service(state)
    try:
        manager = service.cells
        assert manager is not None and service.store is not None
        store = service.store
        spec = manager.specs[WORKFLOW]
        out: dict[int, dict[str, float]] = {}
        for k in sizes:
            ref = InstanceRef(WORKFLOW, f"k{k}")
            row: dict[str, float] = {}

            async def read(ref: InstanceRef = ref) -> tuple[Any, str]:
                # as a cell loads an instance (a light claim) and starts its run
                loaded = await store.claim(ref)
                assert loaded is not None
                recorded = await store.journal(ref) if loaded.history_dropped else None
                return loaded, recorded

            row["store read"], (loaded, recorded) = await timed(read, repeat)

            def build(loaded: Any = loaded) -> Machine:
                return Machine(
                    loaded.state,
                    loaded.steps,
                    loaded.events,
                    step_limit=spec.step_limit,
                    history_dropped=loaded.history_dropped,
                )

            async def engine(build: Callable[[], Machine] = build, recorded: Any = recorded) -> Any:
                machine = build()
                machine.recover(manager.now())
                return machine.start_run(manager.now(), recorded)

            row["engine"], start = await timed(engine, repeat)

            async def message(start: Any = start, loaded: Any = loaded) -> bytes:
                return _dumps([{"k": "reset"}, start_message(start, loaded)])

            row["start message"], payload = await timed(message, repeat)

            parse, turn = [], []
            for _ in range(repeat):  # a fresh isolate each time, as after a restart
                isolate, _ = await manager.take_isolate()
                try:
                    await isolate.turn([{"k": "env", **manager.settings.env_message}])
                    parse.append(await js_parse_cpu(isolate, payload))
                    turn.append(await js_turn_cpu(isolate, payload))
                finally:
                    await isolate.close()
            row["JS parse"], row["JS turn"] = median_cpu(parse), median_cpu(turn)
            out[k] = row
        return out
    finally:
        await service.stop()


def start_message(start: Any, loaded: Any) -> dict[str, Any]:
    """The `wf.start` message as CellRun.post_start builds it (no test modifiers, no
    version check)."""
    state = loaded.state
    return {
        "k": "wf.start",
        "g": start.generation,
        "className": "WaiterWorkflow",
        "event": {
            "payload": state.params,
            "timestamp": state.created_at,
            "instanceId": state.id,
            "workflowName": state.workflow,
            "schedule": None,
        },
        "journal": RawJson(start.journal_json()),
        "unfinished": [],
        "stepLimit": start.step_limit,
        "speculate": True,
        "rollback": start.rollback,
        "checkVersion": False,
    }


async def js_parse_cpu(isolate: Isolate, payload: bytes) -> float:
    """CPU of the JSON parse of the inbox as the bridge does it (and of the journal text
    inside it, when it is a string), on the isolate's thread."""
    source = (
        "(() => { const m = JSON.parse(globalThis.__bench_payload);"
        " for (const x of m) if (typeof x.journal === 'string') JSON.parse(x.journal);"
        " return 0; })()"
    )

    def setup() -> None:
        assert isolate._context is not None
        isolate._context.set("__bench_payload", payload.decode())

    await isolate.thread.run(setup)

    def run() -> float:
        before = time.thread_time()
        isolate.eval_sync(source)
        return time.thread_time() - before

    return await isolate.thread.run(run)


async def js_turn_cpu(isolate: Isolate, payload: bytes) -> float:
    """CPU of the turns that deliver the start and replay run() up to the wait."""
    outbox = await isolate.turn(orjson.loads(payload))
    spent = isolate.last_turn_cpu_ms
    while isolate.runnable:  # a turn is cut into slices (TURN_SLICE_MS)
        outbox += await isolate.turn([])
        spent += isolate.last_turn_cpu_ms
    if not any(m.get("op") == "wf.wait" for m in outbox):
        raise RuntimeError(f"the replay did not reach the wait: {outbox[:3]}")
    return spent / 1000


async def end_to_end(state: Path, sizes: list[int], repeat: int) -> dict[int, float]:
    """Median process CPU (s) from sending the event to completion, per K, each time on a
    service restarted on a fresh copy of the state (one sample per restart)."""
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeat):
        for size, cpu in (await end_to_end_once(state, sizes)).items():
            samples[size].append(cpu)
    return {size: median_cpu(cpu) for size, cpu in samples.items()}


async def end_to_end_once(state: Path, sizes: list[int]) -> dict[int, float]:
    """Process CPU (s) from sending the event to completion, per K, on a restarted service."""
    out: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="replay-cost-") as scratch:
        copy = Path(scratch) / "state"
        shutil.copytree(state, copy)
        service = await start_service(copy)
        try:
            await asyncio.sleep(0.5)  # let startup work (horizon scan, refill) settle
            # the first wake-up after a start pays one-time costs (the first isolate, ...)
            await call(service, "sendEvent", id=WARM_UP, type="go", payload='{"x":1}')
            await wait_status(service, WARM_UP, "complete", 120)
            for k in sizes:
                instance_id = f"k{k}"
                before = CPU()
                await call(service, "sendEvent", id=instance_id, type="go", payload='{"x":1}')
                # (a status read costs ~0.2 ms of CPU: polled every 5 ms, a run that takes
                # longer would be charged more of them, ~0.3 us per step at K = 5,000)
                await wait_status(service, instance_id, "complete", 120, every=E2E_POLL_S)
                out[k] = CPU() - before
        finally:
            await service.stop()
    return out


def report(sizes: list[int], parts: dict[int, dict[str, float]], e2e: dict[int, float]) -> str:
    k = max(sizes)
    lines = [f"us per recorded step at K = {k} (CPU, K minus K = 0, / K)", ""]
    lines.append("| component | K=0 (ms) | K (ms) | us/step |")
    lines.append("|---|---|---|---|")
    total = 0.0
    for name in parts[k]:
        base, big = parts[0][name], parts[k][name]
        per = (big - base) * 1e6 / k
        if name != "JS parse":  # part of "JS turn"
            total += per
        lines.append(f"| {name} | {base * 1e3:.2f} | {big * 1e3:.2f} | {per:.2f} |")
    lines.append(f"| **sum (JS parse is inside JS turn)** | | | **{total:.2f}** |")
    lines.append("")
    for size in sizes:
        if size:
            per = (e2e[size] - e2e[0]) * 1e6 / size
            lines.append(
                f"end to end K={size}: {e2e[size] * 1e3:.1f} ms CPU (K=0: "
                f"{e2e[0] * 1e3:.1f} ms) -> {per:.2f} us/step"
            )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--state", type=Path, default=Path("/tmp/celld-replay-cost"))
    parser.add_argument("--no-e2e", action="store_true")
    parser.add_argument("--e2e-repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [0, args.steps]
    marker = args.state / f"recorded-{args.steps}-with-warm-up"
    if not marker.exists():
        shutil.rmtree(args.state, ignore_errors=True)
        args.state.mkdir(parents=True)
        await record(args.state, sizes)
        marker.touch()
    parts = await components(args.state, sizes, args.repeat)
    e2e = {} if args.no_e2e else await end_to_end(args.state, sizes, args.e2e_repeat)
    if not e2e:
        e2e = {size: 0.0 for size in sizes}
    print(report(sizes, parts, e2e))


if __name__ == "__main__":
    asyncio.run(main())
