"""How fast a project with npm dependencies loads: isolate creation and start-to-serving.

    python bench/project_load.py

* isolate creation: the median time to create a QuickJS context and evaluate the runtime
  plus a Worker bundle (as bench/http_hello.py measures for the signup example), for the
  signup example and for compat/projects/npm-app (hono, zod, nanoid, itty-router, cookie,
  ms, with nodejs_compat);
* start-to-serving: from starting `celld run` to the first answered request, with an empty
  module cache (first run) and with the cache from the run before.

The npm project's packages must be installed (`npm ci` in compat/projects/npm-app).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import quickjs

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from celld.isolate.program import build_program  # noqa: E402
from celld.project.config import find_config, load_config  # noqa: E402


def creation_ms(project: Path, samples: int = 30) -> tuple[float, float, int, int]:
    """Median wall and CPU ms to create an isolate with `project` loaded (CPU time is what
    a busy shared machine disturbs least), its memory, and the size of its program."""
    config = load_config(find_config(project, None))
    program = build_program(
        config.main, root=config.root, compatibility_flags=config.compatibility_flags
    )
    timings, cpu = [], []
    for _ in range(samples):
        started, started_cpu = time.perf_counter(), time.thread_time()
        context = quickjs.Context()
        context.eval(program.script.source)
        timings.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
    memory = int(context.memory()["memory_used_size"])
    size = len(program.script.source)
    return statistics.median(timings), statistics.median(cpu), memory, size


def start_to_serving(project: Path, state: Path, path: str) -> float:
    """Seconds from `celld run` starting to the first answer on `path`."""
    port = 18_000 + int(time.time() * 1000) % 1000
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "celld", "run", str(project), "--port", str(port),
         "--persist-to", str(state), "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5).status_code < 500:
                    return time.perf_counter() - started
            except httpx.TransportError:
                time.sleep(0.005)
            if process.poll() is not None:
                raise RuntimeError(f"celld run {project} exited with {process.returncode}")
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    signup = REPO / "examples" / "signup"
    npm_app = REPO / "compat" / "projects" / "npm-app"
    hello = REPO / "examples" / "hello"
    print("isolate creation (median of 30)")
    for name, project in (("signup example", signup), ("npm-app (hono, zod, ...)", npm_app)):
        wall, cpu, memory, size = creation_ms(project)
        print(
            f"  {name:<26} {wall:6.1f} ms wall, {cpu:5.1f} ms CPU  {memory / 1024:5.0f} KiB"
            f"  program {size / 1024:.0f} KiB"
        )
    print("start-to-serving (median of 5)")
    for name, project, path in (("hello example", hello, "/"), ("npm-app", npm_app, "/hello")):
        cold, warm = [], []
        for _ in range(5):
            state = Path(tempfile.mkdtemp(prefix="celld-bench-"))
            try:
                cold.append(start_to_serving(project, state, path))
                warm.append(start_to_serving(project, state, path))
            finally:
                shutil.rmtree(state, ignore_errors=True)
        print(
            f"  {name:<14} first run {statistics.median(cold):.2f} s, "
            f"cached module graph {statistics.median(warm):.2f} s"
        )


if __name__ == "__main__":
    main()
