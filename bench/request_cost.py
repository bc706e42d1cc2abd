"""Server CPU of one Worker request through `celld run`, from a steady client.

    python bench/request_cost.py [--seconds 5] [--rounds 3] [--profile out.txt]

Starts `celld run bench/project` (``--log-level warning``, as benchmarks run), creates one
BenchWorkflow instance and lets it finish and hibernate, then drives each route with `wrk`
(one connection, keep-alive) for `--seconds` and reads the server's CPU time from
/proc/<pid>/stat before and after: CPU per request = (user + system) / requests. Routes:
``GET /ping`` (a Worker that answers without touching anything), ``GET /status?id=``
of the hibernated instance (`env.BENCH.get(id)` then `await instance.status()`) and the
same of a SleeperWorkflow instance asleep for ten minutes (in memory: `status-resident`).
`--profile` also runs py-spy (``pip install py-spy``) on
the server during one more round of the last route and writes its stacks (``--format raw``).

The load average is printed with every figure: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.celld_server import free_port  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` and its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each of `pid`'s threads: "loop" (the main thread, which runs the event
    loop) and the others by thread id (Python does not name OS threads)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = "loop" if task.name == str(pid) else task.name
            stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(stat[11]) + int(stat[12])) / TICKS
    return out


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def wrk(url: str, seconds: float, script: Path | None = None) -> int:
    """Requests `wrk` completed on one connection in `seconds`."""
    command = ["wrk", "-t1", "-c1", f"-d{int(seconds)}s", url]
    if script is not None:
        command[1:1] = ["-s", str(script)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"{url}: non-2xx answers\n{out}")
    match = re.search(r"(\d+) requests in", out)
    if match is None:
        raise RuntimeError(f"wrk said:\n{out}")
    return int(match.group(1))


@contextmanager
def served(repo: Path, prefix: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`celld run` of `repo`'s bench/project in one process, its state and log in a fresh
    folder, once it answers: its process and base URL; stopped and its folder removed
    afterwards (exits with its log if it never answers)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    port = free_port()
    log = open(work / "celld.log", "ab")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "celld", "run", str(repo / "bench" / "project"),
         "--port", str(port), "--persist-to", str(work / "state"), "--log-level", "warning",
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=repo,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=base, timeout=30) as client:
            while True:
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or process.poll() is not None:
                    sys.exit((work / "celld.log").read_text())
                time.sleep(0.1)
        yield process, base
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--only", default=None, help="one route: ping, status or status-resident")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian package wrk)")
    with served(REPO, "celld-reqcost-") as (process, base):
        client = httpx.Client(base_url=base, timeout=30)
        created = client.post("/create", json={"steps": 1}).json()
        instance = created["id"]
        while client.get("/status", params={"id": instance}).json()["status"] != "complete":
            time.sleep(0.05)
        # one that stays in memory: asleep for 10 minutes, under the residency (an hour)
        sleeper = client.post("/create?wf=SLEEPER", json={"sleep_ms": 600_000}).json()["id"]
        time.sleep(1.5)  # past the residency of a finished instance: it hibernates
        routes = {
            "ping": (f"{base}/ping", None),
            "status": (f"{base}/status?id={instance}", None),
            "status-resident": (f"{base}/status?wf=SLEEPER&id={sleeper}", None),
        }
        if args.only:
            routes = {args.only: routes[args.only]}
        for name, (url, script) in routes.items():
            wrk(url, 1, script)  # warm up
            figures = []
            for _ in range(args.rounds):
                before = cpu_seconds(process.pid)
                threads = thread_cpu(process.pid)
                count = wrk(url, args.seconds, script)
                used = cpu_seconds(process.pid) - before
                after = thread_cpu(process.pid)
                figures.append(used / count * 1e6)
                split = sorted(((after[t] - threads.get(t, 0.0)) / count * 1e6, t) for t in after)
                parts = ", ".join(f"{t} {us:.0f}" for us, t in reversed(split) if us >= 10)
                print(
                    f"{name}: {count} requests, {figures[-1]:.0f} us CPU each "
                    f"({parts}; load {loadavg()})"
                )
            print(f"{name}: min {min(figures):.0f} us, max {max(figures):.0f} us")
        if args.profile is not None:
            spy = subprocess.Popen(
                ["py-spy", "record", "-r", "250", "-f", "raw", "-o",
                 str(args.profile), "-p", str(process.pid), "-d", str(int(args.seconds) + 1)],
            )  # fmt: skip
            time.sleep(1)
            url, script = routes[next(reversed(routes))]
            wrk(url, args.seconds, script)
            spy.wait()


if __name__ == "__main__":
    main()
