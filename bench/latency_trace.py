"""One instance's timeline, create to complete, over HTTP on an idle `celld run`.

The server is `celld run` started by this script in a child process with trace points
wrapped around the functions a create and a step pass through (the Worker request, the
binding, the store's writer, every turn); each records (monotonic ns, thread, label).
The driver creates `-n` 10-step `BenchWorkflow` instances one at a time, as
`bench/run.py`'s `create_to_complete` does (polls 15 ms after the create's answer, then
every 10 ms), and prints, for the median instance, the timeline of trace points relative
to the request's arrival, and for every gap between consecutive points the median over
all instances, with the latency p50/p90 (create sent -> engine's clock after the last
step). A diagnostic for finding waits that are not fsync; wall time on a shared machine,
so compare runs made back to back.

    python bench/latency_trace.py -n 100
    python bench/latency_trace.py -n 200 --quiet        # figures only
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "bench" / "project"
sys.path.insert(0, str(ROOT))  # this checkout's celld, whatever is installed

_events: list[tuple[int, str, str]] = []


def _mark(label: str) -> None:
    _events.append((time.monotonic_ns(), threading.current_thread().name[:12], label))


def _wrap_sync(owner: Any, name: str, label: str, detail: Any = None) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        extra = detail(*args) if detail else ""
        _mark(f"{label}>{extra}")
        try:
            return original(*args, **kwargs)
        finally:
            _mark(f"{label}<{extra}")

    static = isinstance(owner.__dict__.get(name), staticmethod)
    setattr(owner, name, staticmethod(wrapper) if static else wrapper)


def _wrap_async(owner: Any, name: str, label: str, detail: Any = None) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        extra = detail(*args) if detail else ""
        _mark(f"{label}>{extra}")
        try:
            return await original(*args, **kwargs)
        finally:
            cpu = getattr(args[0], "last_turn_cpu_ms", None) if label == "turn" else None
            _mark(f"{label}<{extra}" + (f" cpu {cpu * 1000:.0f}us" if cpu is not None else ""))

    setattr(owner, name, wrapper)


def _install() -> None:
    """Trace points on the paths of a create and of a step."""
    from celld.cells import binding, cell, manager
    from celld.isolate import host, inline, isolate, threads, worker_pool
    from celld.store import batch, sqlite

    _wrap_async(
        worker_pool.WorkerPool, "handle", "http", lambda self, method, url, *_: url.split("/")[-1]
    )
    _wrap_async(binding.WorkflowBindings, "handle", "bind", lambda self, m: m.get("method"))
    _wrap_async(manager.CellManager, "create", "create")
    _wrap_sync(batch.GroupCommitWrites, "write_soon", "soon")
    _wrap_sync(batch.GroupCommitWrites, "_flush_soon", "flush")
    _wrap_sync(sqlite.SqliteStore, "_enqueue", "enq")
    _wrap_sync(sqlite.SqliteStore, "_commit", "commit", lambda self, conn, b: len(b))
    _wrap_sync(sqlite.SqliteStore, "_settle", "settle")
    _wrap_async(cell.Cell, "start_run", "start")

    def kinds(self: Any, inbox: Any) -> str:
        where = "inline" if self.inline else "thread"
        return f"{where}:{','.join(str(m.get('k')) for m in inbox)}"

    _wrap_async(isolate.Isolate, "turn", "turn", kinds)
    _wrap_sync(threads.JsThread, "_run_batch", "jsthread")
    _wrap_sync(inline.InlineTurns, "_slice", "slice")
    _wrap_sync(host.IsolateHost, "_dispatch", "op", lambda self, m: m.get("op"))

    dump_at_stop("LATENCY_TRACE_OUT", lambda: _events)


def dump_at_stop(variable: str, payload: Any) -> None:
    """When the served celld stops, write `payload()` as JSON to the file named by the
    environment variable `variable`."""
    from celld.server import service

    stop = service.Service.stop

    async def stop_and_dump(self: Any) -> None:
        try:
            await stop(self)
        finally:
            with open(os.environ[variable], "w") as out:
                json.dump(payload(), out)

    service.Service.stop = stop_and_dump  # type: ignore[method-assign]


def serve(argv: list[str]) -> None:
    _install()
    from celld.cli.main import main

    sys.argv = ["celld", *argv]
    main()


# -- the driver --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json"} if data else {}
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {payload[:200]!r}")
        return json.loads(payload)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def drive(n: int, k: int, quiet: bool) -> None:
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="celld-latency-"))
    trace_file = work / "trace.json"
    env = {**os.environ, "LATENCY_TRACE_OUT": str(trace_file)}
    command = [
        sys.executable, __file__, "--serve", "run", str(PROJECT), "--port", str(port),
        "--persist-to", str(work / "state"), "--log-level", "warning",
    ]  # fmt: skip
    server = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                Client(port).call("GET", "/health")
                break
            except (OSError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        client = Client(port)
        latencies: list[float] = []
        created: list[float] = []
        sent_at: list[int] = []
        for i in range(-1, n):
            instance_id = f"one{i}"
            sent = time.time() * 1000
            sent_ns = time.monotonic_ns()
            client.call("POST", f"/create?wf=BENCH&id={instance_id}", {"steps": k})
            answered = time.time() * 1000
            time.sleep(0.015)
            while True:
                status = client.call("GET", f"/status?wf=BENCH&id={instance_id}")
                if status.get("status") == "complete":
                    break
                if status.get("status") in ("errored", "terminated"):
                    raise RuntimeError(status)
                time.sleep(0.01)
            if i >= 0:
                latencies.append(status["output"]["finished_at"] - sent)
                created.append(answered - sent)
                sent_at.append(sent_ns)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    print(
        f"create-to-complete n={n} k={k}: p50 {pct(latencies, 50):.1f} ms, "
        f"p90 {pct(latencies, 90):.1f} ms; create answered p50 {pct(created, 50):.2f} ms, "
        f"p90 {pct(created, 90):.2f} ms"
    )
    events = json.loads(trace_file.read_text())
    report(events, sent_at, latencies, quiet)


def report(events: list[Any], sent_at: list[int], latencies: list[float], quiet: bool) -> None:
    """The median instance's timeline, then the median of every gap between points."""
    per_instance: list[list[tuple[int, str, str]]] = []
    bounds = [*sent_at, 2**63]
    index = 0
    for start, end in zip(bounds, bounds[1:], strict=False):
        chunk: list[tuple[int, str, str]] = []
        while index < len(events) and events[index][0] < end:
            if events[index][0] >= start:
                chunk.append(tuple(events[index]))  # type: ignore[arg-type]
            index += 1
        # up to the first status poll: the instance's own work
        cut = next(
            (i for i, e in enumerate(chunk) if e[2].startswith("http>") and "status" in e[2]),
            len(chunk),
        )
        per_instance.append(chunk[:cut])
    spans = []
    for chunk in per_instance:
        inside = sum(
            t1 - t0
            for (t0, _, a), (t1, _, b) in zip(chunk, chunk[1:], strict=False)
            if a.startswith("commit>") and b.startswith("commit<")
        )
        ends = [t for t, _, label in chunk if label.startswith("commit<")]
        if chunk and ends:
            spans.append(((ends[-1] - chunk[0][0]) / 1e6, inside / 1e6))
    if spans:
        total = [s for s, _ in spans]
        committing = [c for _, c in spans]
        rest = [s - c for s, c in spans]
        print(
            f"server side, request in -> last commit: p50 {pct(total, 50):.2f} ms; "
            f"in commits p50 {pct(committing, 50):.2f} ms; "
            f"the rest p50 {pct(rest, 50):.2f} ms, p90 {pct(rest, 90):.2f} ms"
        )
    if quiet:
        return
    median = sorted(range(len(latencies)), key=lambda i: latencies[i])[len(latencies) // 2]
    timeline = per_instance[median]
    if not timeline:
        return
    base = timeline[0][0]
    print(f"\ntimeline of the median instance ({latencies[median]:.1f} ms), us from request in")
    last = base
    for t, thread, label in timeline:
        print(f"{(t - base) / 1000:9.0f} {(t - last) / 1000:+7.0f}  {thread:12s} {label}")
        last = t
    gaps: dict[str, list[float]] = defaultdict(list)
    for chunk in per_instance:
        for (t0, _, a), (t1, _, b) in zip(chunk, chunk[1:], strict=False):
            gaps[f"{a} -> {b}"].append((t1 - t0) / 1000)
    print("\nmedian gap (us) x count per instance, largest total first")
    rows = sorted(
        gaps.items(), key=lambda kv: -statistics.median(kv[1]) * len(kv[1]) / len(per_instance)
    )
    for key, values in rows[:30]:
        per = len(values) / len(per_instance)
        print(f"{statistics.median(values):8.0f} x{per:5.1f}  {key}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    drive(args.n, args.k, args.quiet)


if __name__ == "__main__":
    main()
