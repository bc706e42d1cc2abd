"""Where a plain request's time goes while workflows run: `GET /ping` traced through `celld run`.

The server is `celld run` started by this script in a child process with trace points
(monotonic ns, thread, label; the helpers of bench/latency_trace.py) on a request's way:
its bytes read by the HTTP protocol, the ASGI app entered, the Worker pool's dispatch,
the JS thread taking the batch (it holds the GIL from then on), the turn's end, the
answer settled back on the loop, the response written. Every pass of the event loop is
timed as well, and the callbacks that run workflow work (inline slices, the store's
group-commit completions). The driver pings every 5 ms from bench/pinger.py while `-n`
10-step `BenchWorkflow` instances created with createBatch run (bench/run.py's
`http_under_load`), then prints for the pings sent under load: the latency, the median and
p99 of every gap on the request's way, the loop passes' lengths, and the slowest pings'
timelines. Wall time on a shared machine: compare runs made back to back.

    python bench/ping_trace.py -n 1000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# After site-packages, not first (where Python puts a script's folder): bench/websockets.py
# must not shadow the websockets package uvicorn imports in the served child.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.append(str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's celld, whatever is installed

import latency_trace as lt  # noqa: E402

_passes: list[tuple[int, int, int]] = []  # (start ns, duration ns, callbacks ready)
_slices: list[tuple[int, int, int]] = []  # (start ns, duration ns, thread CPU ns)


def _install() -> None:
    """Trace points on a Worker request's way, and the loop's passes."""
    import asyncio.base_events as base_events

    from uvicorn.protocols.http import httptools_impl

    from celld.isolate import host, inline, threads, worker_pool
    from celld.store import sqlite

    protocol = httptools_impl.HttpToolsProtocol
    received = protocol.data_received

    def data_received(self: Any, data: bytes) -> None:
        if data.startswith(b"GET /ping"):
            lt._mark("in")
        received(self, data)

    protocol.data_received = data_received  # type: ignore[method-assign]
    cycle = httptools_impl.RequestResponseCycle
    run_asgi = cycle.run_asgi

    async def traced_run_asgi(self: Any, app: Any) -> None:
        if self.scope.get("path") == "/ping":
            lt._mark("asgi")
        await run_asgi(self, app)

    cycle.run_asgi = traced_run_asgi  # type: ignore[method-assign]
    send = cycle.send

    async def traced_send(self: Any, message: Any) -> None:
        await send(self, message)
        if message.get("type") == "http.response.body" and self.scope.get("path") == "/ping":
            lt._mark("out")

    cycle.send = traced_send  # type: ignore[method-assign]
    lt._wrap_async(
        worker_pool.WorkerPool, "handle", "handle", lambda self, method, url, *_: url[-5:]
    )
    lt._wrap_sync(worker_pool.WorkerPool, "_on_respond", "respond")
    lt._wrap_sync(host.IsolateHost, "post", "post", lambda self, m: m.get("k"))
    lt._wrap_sync(threads.JsThread, "_flush", "flush")
    lt._wrap_sync(threads.JsThread, "_run_batch", "jsthread")
    if hasattr(threads.JsThread, "_run_then"):  # (celld before the prompt turns has none)
        lt._wrap_sync(threads.JsThread, "_run_then", "jsthread")
        lt._wrap_sync(inline.InlineTurns, "hold", "hold")
        lt._wrap_sync(inline.InlineTurns, "release", "release")
    lt._wrap_sync(threads.JsThread, "_settle", "settled")
    slice_once = inline.InlineTurns._slice

    def traced_slice(self: Any) -> None:
        cpu = time.thread_time_ns()
        began = time.monotonic_ns()
        slice_once(self)
        _slices.append((began, time.monotonic_ns() - began, time.thread_time_ns() - cpu))

    inline.InlineTurns._slice = traced_slice  # type: ignore[method-assign]
    lt._wrap_sync(sqlite.SqliteStore, "_settle", "commits")

    run_once = base_events.BaseEventLoop._run_once

    def traced_run_once(self: Any) -> None:
        began = time.monotonic_ns()
        run_once(self)
        _passes.append((began, time.monotonic_ns() - began, len(self._ready)))

    base_events.BaseEventLoop._run_once = traced_run_once  # type: ignore[method-assign]

    lt.dump_at_stop(
        "LATENCY_TRACE_OUT", lambda: {"events": lt._events, "passes": _passes, "slices": _slices}
    )


def serve(argv: list[str]) -> None:
    _install()
    from celld.cli.main import main

    sys.argv = ["celld", *argv]
    main()


def under_pings(
    command: list[str], env: dict[str, str], port: int, n: int, k: int, prefix: str
) -> tuple[list[list[float]], float, float, int, int]:
    """Start the server `command` (listening on `port`), ping it every 5 ms from
    bench/pinger.py while `n` K-step BenchWorkflow instances are created with createBatch
    and run, then stop it (SIGTERM). The pinger's samples, and the load's window: first
    create to last step (ms since the epoch, the engine's clock) and first create to the
    last completion seen (monotonic ns, this process's clock)."""
    from run import Api, complete, create_many

    server = subprocess.Popen(command, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                lt.Client(port).call("GET", "/health")
                break
            except (OSError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        pinger = subprocess.Popen(
            [sys.executable, str(HERE / "pinger.py"), f"{base}/ping", "--every-ms", "5"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        api = Api(base)
        try:
            time.sleep(1)
            ids = [f"{prefix}{i}" for i in range(n)]
            first_ms = time.time() * 1000
            first_ns = time.monotonic_ns()
            create_many(api, "BENCH", [(i, {"steps": k}) for i in ids], 4)
            done = api.wait_all("BENCH", ids, complete, timeout=300, interval=0.5)
            last_ns = time.monotonic_ns()
        finally:
            out, _ = pinger.communicate("", timeout=120)
        last_ms = max(d["output"]["finished_at"] for d in done.values())
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    return json.loads(out), first_ms, last_ms, first_ns, last_ns


def pings_seen(samples: list[list[float]], first: float, last: float, steps: int) -> str:
    """The pings sent between `first` and `last` (ms), and the steps/s meanwhile."""
    busy = [s[1] for s in samples if first <= s[0] <= last]
    return (
        f"{len(busy)} pings under load: p50 {lt.pct(busy, 50):.2f} ms, "
        f"p99 {lt.pct(busy, 99):.2f} ms, max {max(busy):.1f} ms; "
        f"steps/s {steps * 1000 / (last - first):.0f}"
    )


def drive(n: int, k: int, slowest: int) -> None:
    port = lt.free_port()
    work = Path(tempfile.mkdtemp(prefix="celld-ping-"))
    trace_file = work / "trace.json"
    env = {**os.environ, "LATENCY_TRACE_OUT": str(trace_file)}
    command = [
        sys.executable, __file__, "--serve", "run", str(lt.PROJECT), "--port", str(port),
        "--persist-to", str(work / "state"), "--log-level", "warning",
        "--workers", "1",  # the traced process serves (not a parent over per-core children)
    ]  # fmt: skip
    samples, first, last, _, _ = under_pings(command, env, port, n, k, "p")
    print(pings_seen(samples, first, last, n * k))
    trace = json.loads(trace_file.read_text())
    report(trace["events"], trace["passes"], trace["slices"], slowest)


def report(events: list[Any], passes: list[Any], slices: list[Any], slowest: int) -> None:
    """Per ping under load (from its bytes in to its response written): the gaps between
    its trace points, and the loop passes that ran meanwhile."""
    pings: list[list[Any]] = []
    current: list[Any] | None = None
    for event in events:
        label = event[2]
        if label == "in":
            current = [event]
        elif current is not None:
            current.append(event)
            if label == "out":
                pings.append(current)
                current = None
    busy_starts = [p[0] for p in passes if p[1] > 2_000_000]
    loaded = [p for p in pings if _near(p[0][0], busy_starts)]
    if not loaded:
        print("no ping overlapped a loop pass over 2 ms")
        loaded = pings
    totals = [(p[-1][0] - p[0][0]) / 1e6 for p in loaded]
    print(
        f"{len(loaded)} pings traced under load: server-side p50 {lt.pct(totals, 50):.2f} ms, "
        f"p99 {lt.pct(totals, 99):.2f} ms"
    )
    first = loaded[0][0][0]
    end = loaded[-1][-1][0]
    during = [p for p in passes if first <= p[0] <= end]
    lengths = [p[1] / 1e6 for p in during]
    print(
        f"loop passes meanwhile: {len(during)}, p50 {lt.pct(lengths, 50):.2f} ms, "
        f"p90 {lt.pct(lengths, 90):.2f} ms, p99 {lt.pct(lengths, 99):.2f} ms, "
        f"max {max(lengths):.1f} ms; busy {sum(lengths) / ((end - first) / 1e9) / 10:.0f} %"
    )
    holds = _pairs(events, "hold>", "release>", first, end)
    if holds:
        print(
            f"  holds: {len(holds)}, p50 {lt.pct(holds, 50):.2f} ms, "
            f"p99 {lt.pct(holds, 99):.2f} ms, total {sum(holds) / ((end - first) / 1e9) / 10:.0f} %"
        )
    ran = [s for s in slices if first <= s[0] <= end and s[1] > 50_000]
    if ran:
        wall = [s[1] / 1e6 for s in ran]
        cpu = [s[2] / 1e6 for s in ran]
        print(
            f"  slices that ran: {len(ran)}, wall p50 {lt.pct(wall, 50):.2f} / p99 "
            f"{lt.pct(wall, 99):.2f} ms, loop-thread CPU p50 {lt.pct(cpu, 50):.2f} / p99 "
            f"{lt.pct(cpu, 99):.2f} ms"
        )
    for label in ("commits", "jsthread"):
        spans = _spans(events, label, first, end)
        if spans:
            print(
                f"  {label}: {len(spans)}, p50 {lt.pct(spans, 50):.2f} ms, "
                f"p99 {lt.pct(spans, 99):.2f} ms, max {max(spans):.1f} ms"
            )
    gaps: dict[str, list[float]] = {}
    for ping in loaded:
        own = _own_points(ping)
        for (t0, _, a), (t1, _, b) in zip(own, own[1:], strict=False):
            gaps.setdefault(f"{a} -> {b}", []).append((t1 - t0) / 1000)
    print("\ngap on the request's way (us): p50 / p99 x count per ping")
    for key, values in sorted(gaps.items(), key=lambda kv: -sum(kv[1])):
        print(
            f"{lt.pct(values, 50):8.0f} {lt.pct(values, 99):8.0f} "
            f"x{len(values) / len(loaded):4.1f}  {key}"
        )
    for ping in sorted(loaded, key=lambda p: p[0][0] - p[-1][0])[:slowest]:
        print(f"\nping of {(ping[-1][0] - ping[0][0]) / 1e6:.1f} ms, us from its bytes in")
        start = ping[0][0]
        last = start
        for t, thread, label in _own_points(ping):
            inside = [p for p in passes if last <= p[0] < t]
            longest = max((p[1] for p in inside), default=0) / 1e6
            print(
                f"{(t - start) / 1000:8.0f} {(t - last) / 1000:+7.0f}  {thread:12s} {label:24s}"
                f" passes {len(inside)}, longest {longest:.1f} ms"
            )
            last = t


def _own_points(ping: list[Any]) -> list[Any]:
    """The trace points that are the ping's own (the first of each kind, workflow noise out)."""
    wanted = ("in", "asgi", "handle>", "post>fetch", "hold>", "flush>", "jsthread>", "jsthread<",
              "settled>", "respond>", "handle<", "out")  # fmt: skip
    seen: set[str] = set()
    own = []
    for event in ping:
        label = event[2]
        for want in wanted:
            if label.startswith(want) and want not in seen:
                seen.add(want)
                own.append((event[0], event[1], want.rstrip(">")))
    return own


def _spans(events: list[Any], label: str, first: int, end: int) -> list[float]:
    spans = []
    opened: int | None = None
    for t, _, name in events:
        if not first <= t <= end:
            continue
        if name.startswith(f"{label}>"):
            opened = t
        elif name.startswith(f"{label}<") and opened is not None:
            spans.append((t - opened) / 1e6)
            opened = None
    return spans


def _pairs(events: list[Any], start: str, stop: str, first: int, end: int) -> list[float]:
    """Durations from each `start` point to the next `stop` point."""
    spans = []
    opened: int | None = None
    for t, _, name in events:
        if not first <= t <= end:
            continue
        if name.startswith(start) and opened is None:
            opened = t
        elif name.startswith(stop) and opened is not None:
            spans.append((t - opened) / 1e6)
            opened = None
    return spans


def _near(t: int, starts: list[int]) -> bool:
    """Within a second of a loop pass over 2 ms: the ping ran while the workflows did."""
    import bisect

    i = bisect.bisect_left(starts, t - 1_000_000_000)
    return i < len(starts) and starts[i] <= t + 1_000_000_000


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--slowest", type=int, default=3)
    args = parser.parse_args()
    drive(args.n, args.k, args.slowest)


if __name__ == "__main__":
    main()
