"""What holds the event loop while workflows run: every long callback and GC pause, named.

bench/ping_trace.py follows a `GET /ping` through the server; this script looks at the
other side, the loop itself. The server is `celld run` started in a child process with:
every event-loop callback timed (wall and the loop thread's CPU, so a callback that waited
for a core or for the GIL shows wall above CPU) and those over `--over-ms` kept with what
they ran; the cyclic garbage collector's passes timed through `gc.callbacks` (generation,
objects collected, duration), on whatever thread triggered them. The driver pings every
5 ms from bench/pinger.py while `-n` 10-step `BenchWorkflow` instances created with
createBatch run (bench/run.py's `http_under_load`), then prints the ping latency, the
longest stalls (callbacks and GC passes), and the long callbacks grouped by what they ran.

    python bench/loop_stalls.py -n 1000
    python bench/loop_stalls.py -n 1000 --root /path/to/another/checkout   # its celld
    python bench/loop_stalls.py -n 1000 --env LOOP_STALLS_CENSUS=1  # + the heap's types

A 1 ms sampler thread records the loop thread's stack (celld's and asyncio's frames) while
a callback is over the threshold, so the longest callbacks are printed with what they were
doing. LOOP_STALLS_CENSUS=1 counts the types of the largest heap a full collection walked
under load (after start-up's freeze when the server froze it; ~30 ms a census, left out of
the figures); LOOP_STALLS_FREEZE=1 freezes start-up's heap in a celld that does not.

Wall time on a shared machine: the loop thread's CPU per long callback and the GC pauses
(CPU on one thread, not preempted for long at a time) are the figures to compare between
runs made back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.append(str(HERE))

# (start ns, wall ns, loop CPU ns, what, GC ns inside it)
_long: list[tuple[int, int, int, str, int]] = []
_gc_ns = [0]  # GC time so far on the loop's thread
_current = [0]  # when the callback under way began (0: none)
# (callback start ns, the loop thread's stack: celld's frames, innermost last)
_samples: list[tuple[int, str]] = []
# (start ns, ns, generation, collected, thread, objects tracked at a gen-2 pass's start, CPU ns)
_gc: list[tuple[int, int, int, int, str, int, int]] = []
_counts = {"callbacks": 0, "gc": [0, 0, 0]}


def _what(handle: Any) -> str:
    """A short name for what a callback runs: the task's coroutine or the function."""
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if owner is not None and hasattr(owner, "get_coro"):  # a task's step
        coro = owner.get_coro()
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        name = getattr(coro, "__qualname__", None) or getattr(code, "co_qualname", "?")
        frame = getattr(coro, "cr_frame", None)
        where = f"{Path(code.co_filename).name}:{frame.f_lineno}" if code and frame else ""
        return f"task {name} {where}"
    name = getattr(callback, "__qualname__", None) or type(callback).__qualname__
    module = getattr(callback, "__module__", "") or ""
    return f"{module.rsplit('.', 1)[-1]}.{name}"


def _census(objects: list[Any]) -> list[tuple[str, int, int]]:
    """The types the collector walks most: (type, objects, references held by them)."""
    count: dict[str, int] = defaultdict(int)
    refs: dict[str, int] = defaultdict(int)
    for thing in objects:
        name = type(thing).__qualname__
        count[name] += 1
        if isinstance(thing, dict | list | tuple | set):
            refs[name] += len(thing)
    ranked = sorted(count, key=lambda n: -(count[n] + refs[n]))[:12]
    return [(n, count[n], refs[n]) for n in ranked]


def _install(lt: Any, over_ns: int) -> None:
    import asyncio.events as events
    import gc
    import threading

    run = events.Handle._run

    def timed_run(self: Any) -> None:
        cpu = time.thread_time_ns()
        collecting = _gc_ns[0]
        began = time.monotonic_ns()
        _current[0] = began
        run(self)
        _current[0] = 0
        wall = time.monotonic_ns() - began
        _counts["callbacks"] += 1
        if wall > over_ns:
            used = time.thread_time_ns() - cpu
            _long.append((began, wall, used, _what(self), _gc_ns[0] - collecting))

    events.Handle._run = timed_run  # type: ignore[method-assign]
    loop_thread = threading.get_ident()

    def sample() -> None:
        """Every millisecond: the loop thread's stack, once its callback is over `over_ns`."""
        while True:
            time.sleep(0.001)
            began = _current[0]
            if not began or time.monotonic_ns() - began < over_ns:
                continue
            frame = sys._current_frames().get(loop_thread)
            names = []
            while frame is not None:
                code = frame.f_code
                if "celld" in code.co_filename or "asyncio" in code.co_filename:
                    names.append(f"{Path(code.co_filename).stem}.{code.co_name}")
                frame = frame.f_back
            if _current[0] == began:
                _samples.append((began, " < ".join(names[:10])))

    threading.Thread(target=sample, name="stall-sampler", daemon=True).start()
    started: dict[int, int] = {}
    tracked: dict[int, int] = {}

    cpu_at: dict[int, int] = {}
    census = bool(os.environ.get("LOOP_STALLS_CENSUS"))  # types on the heap (slow: ~30 ms)

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            if info["generation"] == 2:  # counted before the pass is timed
                probe = time.monotonic_ns()
                objects = gc.get_objects()
                tracked[ident] = len(objects)
                if census and gc.get_freeze_count() and len(objects) > _counts.get("census_of", 0):
                    _counts["census_of"] = len(objects)
                    _counts["census"] = _census(objects)
                del objects
                if threading.current_thread() is threading.main_thread():
                    _gc_ns[0] += time.monotonic_ns() - probe  # the probe's own time, left out
            started[ident] = time.monotonic_ns()
            cpu_at[ident] = time.thread_time_ns()
            return
        began = started.pop(ident, None)
        if began is None:
            return
        generation = info["generation"]
        _counts["gc"][generation] += 1
        took = time.monotonic_ns() - began
        used = time.thread_time_ns() - cpu_at.pop(ident)
        _counts.setdefault("gc_cpu_ns", [0, 0, 0])[generation] += used
        if threading.current_thread() is threading.main_thread():
            _gc_ns[0] += took
        if took > 200_000 or generation == 2:
            thread = threading.current_thread().name[:16]
            objects = tracked.pop(ident, 0)
            _gc.append((began, took, generation, info["collected"], thread, objects, used))

    gc.callbacks.append(on_gc)
    if os.environ.get("LOOP_STALLS_FREEZE"):  # an experiment: freeze once serving
        from celld.cli import serve as served

        startup = served.DevServer.startup

        async def startup_then_freeze(self: Any, sockets: Any = None) -> None:
            await startup(self, sockets)
            gc.collect()
            gc.freeze()
            _counts["frozen"] = gc.get_freeze_count()

        served.DevServer.startup = startup_then_freeze  # type: ignore[method-assign]
    lt.dump_at_stop(
        "LOOP_STALLS_OUT",
        lambda: {"long": _long, "gc": _gc, "counts": _counts, "samples": _samples},
    )


def serve(root: str, over_ms: float, argv: list[str]) -> None:
    import latency_trace as lt  # (it puts this checkout first on the path: `root` goes before)

    sys.path.insert(0, root)
    _install(lt, int(over_ms * 1e6))
    from celld.cli.main import main

    sys.argv = ["celld", *argv]
    main()


def drive(n: int, k: int, root: Path, over_ms: float, top: int, env_extra: dict[str, str]) -> None:
    sys.path.insert(0, str(HERE.parent))
    import latency_trace as lt
    from ping_trace import pings_seen, under_pings

    port = lt.free_port()
    work = Path(tempfile.mkdtemp(prefix="celld-stalls-"))
    out_file = work / "stalls.json"
    env = {**os.environ, **env_extra, "LOOP_STALLS_OUT": str(out_file)}
    command = [
        sys.executable, __file__, "--serve", str(root), str(over_ms), "run",
        str(lt.PROJECT), "--port", str(port), "--persist-to", str(work / "state"),
        "--log-level", "warning", "--workers", "1",  # one process, as bench/run.py runs it
    ]  # fmt: skip
    load = os.getloadavg()[0]
    samples, first_ms, last_ms, first_ns, last_ns = under_pings(command, env, port, n, k, "s")
    seen = pings_seen(samples, first_ms, last_ms, n * k)
    print(f"root {root}; load {load:.2f} -> {os.getloadavg()[0]:.2f}; {seen}")
    data = json.loads(out_file.read_text())
    report(data, first_ns, last_ns, top)


def report(data: dict[str, Any], first: int, last: int, top: int) -> None:
    """The long callbacks and GC passes between the first create and the last completion."""
    long = [c for c in data["long"] if first <= c[0] <= last]
    gcs = [g for g in data["gc"] if first <= g[0] <= last]
    seconds = (last - first) / 1e9
    counts = data["counts"]
    walls = sorted((c[1] / 1e6 for c in long), reverse=True)
    print(
        f"{counts['callbacks']:,} callbacks in all; over the threshold while the runs ran: "
        f"{len(long)} ({len(long) / seconds:.1f}/s); longest {[round(w, 1) for w in walls[:5]]} ms"
    )
    for over in (5, 10, 20):
        print(f"  over {over} ms: {sum(1 for w in walls if w > over)}")
    cpu = [round(ns / 1e6) for ns in counts.get("gc_cpu_ns", [0, 0, 0])]
    print(
        f"GC passes in all (gen 0/1/2): {counts['gc']}, their CPU {cpu} ms; "
        f"frozen {counts.get('frozen')}"
    )
    if counts.get("census"):
        print(
            f"  the largest heap a gen-2 pass walked ({counts['census_of']:,} objects): "
            + ", ".join(f"{n} {c:,} ({r:,} refs)" for n, c, r in counts["census"])
        )
    gen2 = [g for g in gcs if g[2] == 2]
    slow = sorted(gcs, key=lambda g: -g[1])
    if slow:
        print(
            f"  while the runs ran: gen 2 {len(gen2)} ("
            + ", ".join(
                f"{g[1] / 1e6:.1f} ms (CPU {g[6] / 1e6:.1f}) of {g[5]:,} objects" for g in gen2[:10]
            )
            + "); longest: "
            + ", ".join(f"gen {g[2]} {g[1] / 1e6:.1f} ms on {g[4]}" for g in slow[:5])
        )
    inside = [c for c in long if c[4]]
    print(
        f"  long callbacks with a GC pass inside: {len(inside)}, their GC "
        f"{sum(c[4] for c in inside) / 1e6:.1f} ms of {sum(c[1] for c in inside) / 1e6:.1f} ms"
    )
    groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for _, wall, cpu, what, collecting in long:
        groups[what].append((wall / 1e6, (cpu - collecting) / 1e6))
    print("\nlong callbacks by what ran: count, wall p50 / max, loop CPU less GC p50 / max (ms)")
    ordered = sorted(groups.items(), key=lambda kv: -sum(w for w, _ in kv[1]))
    _stall_stacks(long, data.get("samples", []), 8)
    for what, values in ordered[:top]:
        wall = sorted(w for w, _ in values)
        cpu = sorted(c for _, c in values)
        print(
            f"{len(values):5d}  {wall[len(wall) // 2]:6.1f} / {wall[-1]:6.1f}   "
            f"{cpu[len(cpu) // 2]:6.1f} / {cpu[-1]:6.1f}   {what}"
        )


def _stall_stacks(long: list[Any], samples: list[Any], over_ms: float) -> None:
    """For the callbacks longer than `over_ms`, the stacks the sampler saw most."""
    starts = {c[0]: c for c in long if c[1] > over_ms * 1e6}
    seen: dict[str, int] = defaultdict(int)
    for began, stack in samples:
        if began in starts:
            seen[stack] += 1
    worst = sorted(starts.values(), key=lambda c: -(c[2] - c[4]))[:6]
    for began, wall, cpu, what, collecting in worst:
        mine: dict[str, int] = defaultdict(int)
        for at, stack in samples:
            if at == began:
                mine[stack] += 1
        print(
            f"\n{what}: wall {wall / 1e6:.1f} ms, loop CPU {(cpu - collecting) / 1e6:.1f} ms "
            f"+ GC {collecting / 1e6:.1f} ms; its samples:"
        )
        for stack, times in sorted(mine.items(), key=lambda kv: -kv[1])[:4]:
            print(f"  {times:4d}  {stack}")
    if not seen:
        return
    print(f"\nstacks sampled (1 ms) inside callbacks over {over_ms:g} ms, most seen first:")
    for stack, times in sorted(seen.items(), key=lambda kv: -kv[1])[:12]:
        print(f"{times:5d}  {stack}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2], float(sys.argv[3]), sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--root", type=Path, default=HERE.parent, help="the celld checkout")
    parser.add_argument("--over-ms", type=float, default=3.0)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    args = parser.parse_args()
    extra = dict(e.split("=", 1) for e in args.env)
    drive(args.n, args.k, args.root.resolve(), args.over_ms, args.top, extra)


if __name__ == "__main__":
    main()
