#!/usr/bin/env python3
"""Benchmarks: celld against `wrangler dev`, same Worker project, same workloads, one table.

    python bench/run.py                     # celld only
    python bench/run.py --wrangler --out bench/RESULTS.md   # both side by side, with ratios
    python bench/run.py --wrangler --quick  # smaller sizes
    python bench/run.py --only throughput_k10,replay --wrangler

Every workload starts a fresh server on a fresh state folder (celld: `celld run`;
wrangler dev: bench/wrangler/start.sh)
and drives bench/project over HTTP. Latencies come from timestamps the workflow
takes inside the engine (`Date.now()` in a step or after the last step), never
from polling, so the poll interval does not show up in them. Server CPU is the
user+system time of every process in the server's process group (/proc), and
RSS is summed over that group too (wrangler dev is node plus two workerd).

The report goes to stdout: the command and the machine's load average (at start and
end), issue 24's targets (every one, judged from the figures of the same run by
`goals()`, "not run" where its workload did not run), issue 17's remaining targets
(`earlier_goals()`), then every figure; --out writes it as markdown with the machine and
the versions (bench/RESULTS.md); --json keeps the raw figures.
See bench/README.md for what each workload means.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import math
import os
import platform
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROJECT = HERE / "project"
#: bench/wrangler's Worker, for the workloads its own driver (bench_drive.py) runs.
DRIVE_WORKER = Path("wrangler") / "worker"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def find_peer() -> Path:
    """bench/wrangler: start.sh/stop.sh for wrangler dev, bench_drive.py and its Worker."""
    candidate = ROOT / "bench" / "wrangler"
    if (candidate / "start.sh").exists():
        return candidate
    raise SystemExit("cannot find bench/wrangler/start.sh (needed for --wrangler)")


# -- measuring a server from outside ------------------------------------------------------


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/pid/stat after the command name) of every live process:
    fields[1] is the parent, fields[2] the process group, fields[11:13] user and system
    ticks."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                yield int(entry), f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue


def group_pids(pgid: int) -> list[int]:
    return [pid for pid, fields in proc_stats() if int(fields[2]) == pgid]


def group_cpu_seconds(pgid: int) -> float:
    """user+system seconds of the live processes of a process group."""
    total = 0
    for pid in group_pids(pgid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def group_rss_bytes(pgid: int) -> int:
    total = 0
    for pid in group_pids(pgid):
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except OSError:
            continue
    return total


class RssSampler:
    """Samples a process group's RSS in a thread; `peak` is the highest seen."""

    def __init__(self, pgid: int, interval: float = 0.2) -> None:
        self.pgid = pgid
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, group_rss_bytes(self.pgid))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, group_rss_bytes(self.pgid))
            self._stop.wait(self.interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pct(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


def now_ms() -> float:
    return time.time() * 1000


# -- targets --------------------------------------------------------------------------------


class Target:
    """A server under test: started fresh on a state folder, stopped by process group."""

    name = "?"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.pgid = 0
        self.state: Path | None = None
        #: the Worker project served (bench/project unless a workload brings its own)
        self.project = PROJECT

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(
        self, state: Path | None = None, env: dict[str, str] | None = None, project: Path = PROJECT
    ) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        """Stop and start again on the same state folder (and settings)."""
        raise NotImplementedError

    def fresh_state(self, label: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{self.name}-{label}-", dir=self.workdir))
        return path

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not answer on {self.url} in {timeout}s")


class CelldTarget(Target):
    name = "celld"

    def __init__(self, workdir: Path, threads: int | None) -> None:
        super().__init__(workdir)
        self.threads = threads
        self.process: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}

    def start(
        self, state: Path | None = None, env: dict[str, str] | None = None, project: Path = PROJECT
    ) -> None:
        self.state = state or self.state
        self.env = dict(env or {})
        self.project = project
        assert self.state is not None
        self.port = free_port()
        command = [
            sys.executable, "-m", "celld", "run", str(project), "--port", str(self.port),
            "--persist-to", str(self.state), "--log-level", "warning",
            "--workers", "1",  # one process, whatever the cores (bench/README.md: why)
        ]  # fmt: skip
        if self.threads:
            command += ["--threads", str(self.threads)]
        log = open(self.state.parent / f"{self.state.name}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            start_new_session=True,
        )
        self.pgid = self.process.pid
        self.wait_ready(60)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.pgid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start(self.state, self.env, self.project)


class WranglerTarget(Target):
    """wrangler dev through bench/wrangler/start.sh (pid files, logs and an install if one
    is needed under `cache`)."""

    name = "wrangler"

    def __init__(self, workdir: Path, cache: Path) -> None:
        super().__init__(workdir)
        self.peer = find_peer()
        self.cache = cache

    def _env(self) -> dict[str, str]:
        return {**os.environ, "WRANGLER_DEV_DIR": str(self.cache), "LOG_LEVEL": "warn"}

    def start(
        self, state: Path | None = None, env: dict[str, str] | None = None, project: Path = PROJECT
    ) -> None:
        self.state = state or self.state
        self.project = project
        assert self.state is not None
        self.port = free_port()
        result = subprocess.run(
            [str(self.peer / "start.sh"), str(project), str(self.port), str(self.state)],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            raise RuntimeError(f"start.sh failed:\n{result.stderr[-3000:]}")
        self.pgid = int(result.stdout.strip().splitlines()[-1])
        self.wait_ready(60)

    def stop(self) -> None:
        if not self.pgid:
            return
        subprocess.run(
            [str(self.peer / "stop.sh"), str(self.port)],
            env=self._env(),
            capture_output=True,
            timeout=60,
        )
        self.pgid = 0

    def restart(self) -> None:
        self.stop()
        self.start(self.state, None, self.project)

    def version(self) -> str:
        """The versions start.sh runs: tests/wrangler's install when there is one (as
        start.sh prefers it), else the one it made under `cache`."""
        for install in (ROOT / "tests" / "wrangler", self.cache):
            parts = []
            for package in ("wrangler", "miniflare", "workerd"):
                manifest = install / "node_modules" / package / "package.json"
                if manifest.exists():
                    parts.append(f"{package} {json.loads(manifest.read_text())['version']}")
            if parts:
                return ", ".join(parts)
        return "unknown"


# -- talking to the bench Worker --------------------------------------------------------------


class Api:
    """The bench Worker's HTTP API (bench/project/src/index.js); one client per thread."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._local = threading.local()

    def _client(self) -> httpx.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = httpx.Client(base_url=self.base, timeout=600)
            self._local.client = client
        return client

    def call(self, path: str, wf: str, body: Any = None, **params: Any) -> Any:
        response = self._client().post(
            path, params={"wf": wf, **params}, content=json.dumps(body) if body is not None else ""
        )
        data = response.json()
        if response.status_code != 200:
            raise RuntimeError(f"{path} {params}: {response.status_code} {data}")
        return data

    def create(self, wf: str, instance_id: str, params: dict[str, Any]) -> None:
        self.call("/create", wf, params, id=instance_id)

    def create_batch(self, wf: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        self.call("/create-batch", wf, [{"id": i, "params": p} for i, p in items])

    def statuses(self, wf: str, ids: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for start in range(0, len(ids), 100):
            out.update(self.call("/statuses", wf, ids[start : start + 100]))
        return out

    def event(self, wf: str, instance_id: str, payload: dict[str, Any]) -> None:
        self.call("/event", wf, payload, id=instance_id, type="go")

    def wait_all(
        self,
        wf: str,
        ids: list[str],
        done: Callable[[dict[str, Any]], bool],
        timeout: float,
        interval: float = 0.25,
    ) -> dict[str, Any]:
        """Poll (in batches) until done(status) holds for every id; returns the last statuses."""
        pending = list(ids)
        seen: dict[str, Any] = {}
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} of {len(ids)} {wf} instances not done")
            time.sleep(interval)
            got = self.statuses(wf, pending)
            for instance_id, status in got.items():
                if status.get("status") in ("errored", "terminated", "error"):
                    raise RuntimeError(f"{wf} {instance_id}: {status}")
                if done(status):
                    seen[instance_id] = status
            pending = [i for i in pending if i not in seen]
        return seen

    def close(self) -> None:
        client = getattr(self._local, "client", None)
        if client is not None:
            client.close()
            self._local.client = None


def complete(status: dict[str, Any]) -> bool:
    return status.get("status") == "complete"


def settled_waiting(recorded: int) -> Callable[[dict[str, Any]], bool]:
    """celld says "waiting"; wrangler dev never does (it stays "running"), so there count the
    recorded step outputs it reports instead."""

    def check(status: dict[str, Any]) -> bool:
        if status.get("status") == "waiting":
            return True
        outputs = status.get("recorded")
        return outputs is not None and outputs >= recorded

    return check


def create_many(
    api: Api, wf: str, items: list[tuple[str, dict[str, Any]]], concurrency: int
) -> float:
    """createBatch in chunks of 100 on `concurrency` threads; returns seconds taken."""
    chunks = [items[i : i + 100] for i in range(0, len(items), 100)]
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda chunk: api.create_batch(wf, chunk), chunks))
    return time.monotonic() - started


# -- workloads ------------------------------------------------------------------------------


@dataclass
class Result:
    """One workload on one target: figures by column name, or why it did not run."""

    figures: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None


@dataclass
class Workload:
    key: str
    title: str
    run: Callable[[Target, Api], dict[str, Any]]
    #: Shown instead of running on wrangler dev (None: it runs there too).
    wrangler_skip: str | None = None
    #: Extra environment for celld.
    celld_env: dict[str, str] = field(default_factory=dict)
    #: Columns, in order: (figure key, label, higher is better? None: not to be compared,
    #: e.g. a count, or a figure of runs of different sizes)
    columns: list[tuple[str, str, bool | None]] = field(default_factory=list)
    #: A Worker project of its own (copied into the work folder, so neither server writes
    #: into the original); None: bench/project.
    project: Path | None = None
    #: Left out of the default run (it takes long): runs only when `--only` names it.
    opt_in: bool = False


def throughput(n: int, k: int, c: int) -> Callable[[Target, Api], dict[str, Any]]:
    """N BenchWorkflow instances of K steps, created by C concurrent clients."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        ids = [f"t{k}-{i}" for i in range(n)]
        sent: dict[str, float] = {}
        cpu0 = group_cpu_seconds(target.pgid)
        first = now_ms()

        def create(instance_id: str) -> None:
            sent[instance_id] = now_ms()
            api.create("BENCH", instance_id, {"steps": k})

        with concurrent.futures.ThreadPoolExecutor(c) as pool:
            list(pool.map(create, ids))
        done = api.wait_all("BENCH", ids, complete, timeout=max(120, n * k * 0.05))
        cpu = group_cpu_seconds(target.pgid) - cpu0
        finished = {i: done[i]["output"]["finished_at"] for i in ids}
        span = (max(finished.values()) - first) / 1000
        latencies = [(finished[i] - sent[i]) / 1000 for i in ids]
        return {
            "inst_s": n / span,
            "steps_s": n * k / span,
            "p50_s": pct(latencies, 50),
            "p99_s": pct(latencies, 99),
            "cpu_ms_step": cpu * 1000 / (n * k),
            "wall_s": span,
        }

    return run


def at_once(n: int, k: int) -> Callable[[Target, Api], dict[str, Any]]:
    """N instances of K steps created together (createBatch): steps/s with N running at once."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        ids = [f"a{n}-{i}" for i in range(n)]
        cpu0 = group_cpu_seconds(target.pgid)
        first = now_ms()
        create_many(api, "BENCH", [(i, {"steps": k}) for i in ids], 4)
        done = api.wait_all("BENCH", ids, complete, timeout=max(120, n * k * 0.05))
        cpu = group_cpu_seconds(target.pgid) - cpu0
        span = (max(d["output"]["finished_at"] for d in done.values()) - first) / 1000
        return {"steps_s": n * k / span, "cpu_ms_step": cpu * 1000 / (n * k), "wall_s": span}

    return run


def long_workflow(k: int, timeout: float) -> Callable[[Target, Api], dict[str, Any]]:
    """One instance of K steps: time from create to its last step."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        cpu0 = group_cpu_seconds(target.pgid)
        sent = now_ms()
        api.create("BENCH", "long", {"steps": k})
        done = api.wait_all("BENCH", ["long"], complete, timeout=timeout, interval=0.1)
        cpu = group_cpu_seconds(target.pgid) - cpu0
        seconds = (done["long"]["output"]["finished_at"] - sent) / 1000
        return {
            "wall_s": seconds,
            "steps_s": k / seconds,
            "ms_step": seconds * 1000 / k,
            "cpu_ms_step": cpu * 1000 / k,
        }

    return run


def replay(sizes: tuple[int, ...], timeout: float) -> Callable[[Target, Api], dict[str, Any]]:
    """Instances with K recorded steps waiting for an event; the server restarts (celld hibernates
    everything; wrangler dev reloads its Durable Objects), then each gets its event alone: the
    time until the step after the wait runs, minus the same for K = 0, per recorded step."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        plan = [(f"r0-{j}", 0) for j in range(3)] + [(f"r{k}", k) for k in sizes]
        for instance_id, k in plan:
            api.create("WAITER", instance_id, {"steps": k})
        for instance_id, k in plan:
            api.wait_all("WAITER", [instance_id], settled_waiting(k), timeout=timeout)
        target.restart()
        api.close()
        api.base = target.url
        took: dict[str, float] = {}
        for instance_id, _ in plan:
            api.event("WAITER", instance_id, {"sent_at": now_ms()})
            done = api.wait_all("WAITER", [instance_id], complete, timeout=timeout, interval=0.02)
            output = done[instance_id]["output"]
            took[instance_id] = output["ran_at"] - output["sent_at"]
        base = sorted(took[f"r0-{j}"] for j in range(3))[1]
        out: dict[str, Any] = {"event_k0_ms": base}
        for k in sizes:
            out[f"ms_{k}"] = took[f"r{k}"]
            out[f"us_step_{k}"] = (took[f"r{k}"] - base) * 1000 / k
        return out

    return run


def wake_lag(n: int, sleep_ms: int) -> Callable[[Target, Api], dict[str, Any]]:
    """N instances sleeping `sleep_ms`: how late the step after the sleep ran."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        ids = [f"z{i}" for i in range(n)]
        create_many(api, "SLEEPER", [(i, {"sleep_ms": sleep_ms}) for i in ids], 2)
        done = api.wait_all("SLEEPER", ids, complete, timeout=max(120, n * 0.1))
        late = [d["output"]["late_ms"] for d in done.values()]
        return {"p50_ms": pct(late, 50), "p99_ms": pct(late, 99), "max_ms": max(late)}

    return run


def event_latency(n: int, timeout_text: str) -> Callable[[Target, Api], dict[str, Any]]:
    """N instances waiting for an event (wait timeout `timeout_text`); events sent one at a time,
    latency = when the step after the wait ran - when the event was sent."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        ids = [f"e{i}" for i in range(n)]
        create_many(api, "WAITER", [(i, {"steps": 0, "timeout": timeout_text}) for i in ids], 2)
        api.wait_all("WAITER", ids, settled_waiting(0), timeout=max(120, n * 0.1))
        time.sleep(1)
        for instance_id in ids:
            api.event("WAITER", instance_id, {"sent_at": now_ms()})
            time.sleep(0.005)
        done = api.wait_all("WAITER", ids, complete, timeout=max(120, n * 0.1))
        lat = [d["output"]["ran_at"] - d["output"]["sent_at"] for d in done.values()]
        return {"p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": max(lat)}

    return run


def memory(n: int, wf: str, params: dict[str, Any], settle: float) -> Callable[..., Any]:
    """Server RSS before, at peak while creating N waiting instances, and once they settle."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        time.sleep(1)
        base = group_rss_bytes(target.pgid)
        ids = [f"m{i}" for i in range(n)]
        recorded = 1 if wf == "SLEEPER" else 0
        with RssSampler(target.pgid) as sampler:
            seconds = create_many(api, wf, [(i, params) for i in ids], 4)
            # everything created: wait until the last ones have reached their wait
            api.wait_all(wf, ids[-200:], settled_waiting(recorded), timeout=max(300, n * 0.05))
            seconds_settled = time.monotonic()
        time.sleep(settle)
        after = group_rss_bytes(target.pgid)
        mib = 1024 * 1024
        return {
            "create_s": seconds,
            "inst_s": n / seconds,
            "base_mib": base / mib,
            "peak_mib": sampler.peak / mib,
            "rss_mib": after / mib,
            "kib_inst": (after - base) / 1024 / n,
            "_settled": seconds_settled,
        }

    return run


def create_to_complete(n: int, k: int) -> Callable[[Target, Api], dict[str, Any]]:
    """N K-step BenchWorkflow instances, one at a time on an otherwise idle server: create
    sent -> the engine's clock after the last step. The next create waits until the last one
    is complete; polls start 15 ms after the create answered and repeat every 10 ms (one
    status read each), so they cost the server little while an instance runs."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        latencies: list[float] = []
        answered: list[float] = []
        for i in range(-1, n):  # instance -1 warms the server up and is not counted
            instance_id = f"one{i}"
            sent = now_ms()
            api.create("BENCH", instance_id, {"steps": k})
            answered.append(now_ms() - sent)
            time.sleep(0.015)
            done = api.wait_all("BENCH", [instance_id], complete, timeout=60, interval=0.01)
            if i >= 0:
                latencies.append(done[instance_id]["output"]["finished_at"] - sent)
        return {
            "p50_ms": pct(latencies, 50),
            "p99_ms": pct(latencies, 99),
            "max_ms": max(latencies),
            "create_ms": pct(answered[1:], 50),
        }

    return run


def binary_values(n: int) -> Callable[[Target, Api], dict[str, Any]]:
    """BinaryWorkflow, one instance at a time (after one uncounted warm-up of each shape):
    one step returning a 950,000-byte ArrayBuffer ("mb"), and 20 steps of 64 KiB each
    ("k64"). Create sent -> the engine's clock after the last step, as in
    create_to_complete; `seen` is the same to the poll (every 5 ms) that found it complete;
    `cpu` the server's CPU time per instance (its process group, the warm-up left out)."""
    shapes = {"mb": (950_000, 1), "k64": (65_536, 20)}

    def run(target: Target, api: Api) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, (size, count) in shapes.items():
            latencies: list[float] = []
            seen: list[float] = []
            cpu_before = 0.0
            for i in range(-1, n):
                if i == 0:
                    cpu_before = group_cpu_seconds(target.pgid)
                instance_id = f"{key}{i}"
                sent = now_ms()
                api.create("BINARY", instance_id, {"size": size, "count": count})
                time.sleep(0.005)
                done = api.wait_all("BINARY", [instance_id], complete, timeout=120, interval=0.005)
                polled = now_ms() - sent
                output = done[instance_id]["output"]
                if output["bytes"] != size * count:
                    raise RuntimeError(f"{instance_id}: {output}")
                if i >= 0:
                    latencies.append(output["finished_at"] - sent)
                    seen.append(polled)
            out[f"{key}_p50_ms"] = pct(latencies, 50)
            out[f"{key}_max_ms"] = max(latencies)
            out[f"{key}_seen_p50_ms"] = pct(seen, 50)
            out[f"{key}_cpu_ms"] = (group_cpu_seconds(target.pgid) - cpu_before) * 1000 / n
        return out

    return run


#: Memory a resident isolate may take in the resident cap's budget: the upper end of the
#: 0.5-1 MiB that celld.cells.manager.default_max_resident sizes its cap by.
ISOLATE_BUDGET_MIB = 1.0


def celld_metrics(target: Target) -> str:
    """celld's Prometheus text. Not for polling under load: it asks every resident isolate
    for its memory."""
    response = httpx.get(f"{target.url}/cdn-cgi/celld/metrics", timeout=60)
    response.raise_for_status()
    return response.text


def celld_status_counts(target: Target, workflow: str) -> dict[str, int]:
    """A workflow's instances by status, from one COUNT in celld's store (the explorer API's
    workflow details): cheap enough to poll while the server works."""
    response = httpx.get(
        f"{target.url}/cdn-cgi/local/explorer/api/workflows/{workflow}", timeout=60
    )
    response.raise_for_status()
    return dict(response.json()["result"]["instances"])


def metric(text: str, name: str, labels: str = "") -> float | None:
    """The value of one sample in Prometheus text (`name{labels} value`), None if absent."""
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        parts = line.rsplit(" ", 1)
        if len(parts) == 2 and parts[0] == wanted:
            return float(parts[1])
    return None


def create_batch_sleepers(
    n: int, n_wrangler: int, clients: int, settle_s: float = 3.0
) -> Callable[[Target, Api], dict[str, Any]]:
    """createBatch (chunks of 100 on `clients` threads) of N SleeperWorkflow instances that run
    one step and then sleep a day. inst/s = instances / (first create sent -> every instance
    has reached its sleep): on celld, the store's count of "waiting" instances (the explorer
    API's workflow details, polled every 0.2 s) reaching N; on wrangler dev, which never says
    "waiting", every instance's recorded step outputs (`__LOCAL_DEV_STEP_OUTPUTS`) holding
    the first step. Past the deadline (N / 400 s, at least 120 s: 40 % of the target rate)
    creating stops and the figures are those reached by then (`reached` < N, no RSS once
    asleep), so a slow server costs the full run two minutes, not ten.
    RSS is sampled throughout (peak) and `settle_s` after the count said the last fell asleep
    (`rss_mib`, and `rss_mb` in millions of bytes); celld's budget is the
    idle server's RSS plus the resident cap (`celld_cells_max_resident`) times
    ISOLATE_BUDGET_MIB."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        size = n_wrangler if isinstance(target, WranglerTarget) else n
        time.sleep(1)
        base = group_rss_bytes(target.pgid)
        cap = None
        if isinstance(target, CelldTarget):
            cap = metric(celld_metrics(target), "celld_cells_max_resident")
            if cap is None:
                raise RuntimeError("celld's metrics do not give celld_cells_max_resident")
        ids = [f"s{i}" for i in range(size)]
        asleep = asleep_counter(target, api, ids)
        params = {"sleep_ms": 86_400_000}
        chunks = [[(i, params) for i in ids[j : j + 100]] for j in range(0, size, 100)]
        stop = threading.Event()
        answered: list[float] = []

        def send(chunk: list[tuple[str, dict[str, Any]]]) -> None:
            if not stop.is_set():
                api.create_batch("SLEEPER", chunk)
                answered.append(time.monotonic())

        first = time.monotonic()
        deadline = first + max(120, size / 400)
        with (
            RssSampler(target.pgid) as sampler,
            concurrent.futures.ThreadPoolExecutor(clients) as pool,
        ):
            sending = [pool.submit(send, chunk) for chunk in chunks]
            reached = 0
            try:
                while True:
                    for future in (f for f in sending if f.done()):
                        future.result()  # a refused createBatch ends the workload
                    # wrangler dev's status() costs it 20-40 ms: not asked while it creates
                    if isinstance(target, CelldTarget) or len(answered) == len(chunks):
                        reached = asleep()
                    if reached >= size or time.monotonic() > deadline:
                        break
                    # a COUNT over a million rows is not free: asked less often there
                    celld_every = 0.2 if size <= 50_000 else 1.0
                    time.sleep(celld_every if isinstance(target, CelldTarget) else 0.5)
                until = time.monotonic()
            finally:
                stop.set()  # chunks not yet sent are dropped
        out: dict[str, Any] = {
            "n": size,
            "reached": reached,
            "inst_s": reached / (until - first),
            "base_mib": base / MIB,
            "peak_mib": sampler.peak / MIB,
        }
        if len(answered) == len(chunks):
            out["accept_s"] = size / (max(answered) - first)
        if reached >= size:
            # the statuses agree with the count (celld: "waiting"; a sample, it costs requests)
            api.wait_all("SLEEPER", ids[-200:], settled_waiting(1), timeout=60)
            time.sleep(max(0.0, until + settle_s - time.monotonic()))
            rss = group_rss_bytes(target.pgid)
            out["rss_mib"] = rss / MIB
            out["rss_mb"] = rss / 1e6
        if cap is not None:
            out["max_resident"] = int(cap)
            out["budget_mib"] = base / MIB + cap * ISOLATE_BUDGET_MIB
        return out

    return run


def wake_due_at_once(n: int, lead_s: float) -> Callable[[Target, Api], dict[str, Any]]:
    """N SleeperWorkflow instances that sleep until one absolute moment, `lead_s` after the
    first create (createBatch, chunks of 100 on 4 threads): lateness = when the step after
    the sleep ran - that moment. Run with a residency of 500 ms, so on celld every sleeper
    has hibernated before it is due and its alarm brings it back by replay (celld loads
    those due within its residency window ahead of time, so `hibernated` is read 1.2 s
    before the moment). The workload fails, rather than report a lag of sleepers that were
    never asleep, when the last reaches its sleep less than 1.5 s before they are due."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        ids = [f"d{i}" for i in range(n)]
        due = int(now_ms() + lead_s * 1000)
        create_many(api, "SLEEPER", [(i, {"until_ms": due}) for i in ids], 4)
        count = asleep_counter(target, api, ids)
        while count() < n:
            if now_ms() > due - 1500:
                raise RuntimeError(f"not all {n} asleep 1.5 s before due: a lead of "
                                   f"{lead_s:g} s is too short on this machine")  # fmt: skip
            time.sleep(0.2)
        asleep_before_ms = due - now_ms()
        time.sleep(max(0.0, (due - now_ms()) / 1000 - 1.2))
        hibernated = None
        if isinstance(target, CelldTarget):
            hibernated = metric(celld_metrics(target), "celld_cells_hibernated")
        done = api.wait_all("SLEEPER", ids, complete, timeout=max(120, n * 0.1))
        late = [d["output"]["late_ms"] for d in done.values()]
        return {
            "p50_ms": pct(late, 50),
            "p99_ms": pct(late, 99),
            "max_ms": max(late),
            "asleep_before_s": asleep_before_ms / 1000,
            "hibernated": int(hibernated) if hibernated is not None else None,
        }

    return run


def asleep_counter(target: Target, api: Api, ids: list[str]) -> Callable[[], int]:
    """How many of `ids` have reached their sleep (SleeperWorkflow). celld: one COUNT of its
    "waiting" instances. wrangler dev: the statuses of those not yet seen asleep (ids not yet
    created answer not_found and count as not asleep)."""
    if isinstance(target, CelldTarget):
        return lambda: celld_status_counts(target, "sleeper-workflow").get("waiting", 0)
    pending = set(ids)
    asleep = settled_waiting(1)

    def count() -> int:
        for instance_id, status in api.statuses("SLEEPER", sorted(pending)).items():
            if status.get("status") in ("errored", "terminated"):
                raise RuntimeError(f"SLEEPER {instance_id}: {status}")
            if asleep(status):
                pending.discard(instance_id)
        return len(ids) - len(pending)

    return count


def http_under_load(n: int, k: int, every_ms: float) -> Callable[[Target, Api], dict[str, Any]]:
    """`GET /ping` (answered without touching a workflow) every `every_ms` from its own client
    process (bench/pinger.py) while N K-step BenchWorkflow instances, created with createBatch,
    run; latency as that client sees it, of the pings sent between the first create and the
    last instance's last step (and, apart, of those sent once every create was answered, when
    only the runs load the server). The pings before the first create give the idle figure."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        pinger = subprocess.Popen(
            [sys.executable, str(HERE / "pinger.py"), f"{target.url}/ping",
             "--every-ms", str(every_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            time.sleep(1)
            ids = [f"h{i}" for i in range(n)]
            first = now_ms()
            created = first + 1000 * create_many(api, "BENCH", [(i, {"steps": k}) for i in ids], 4)
            timeout = max(120, n * k * 0.05)
            done = api.wait_all("BENCH", ids, complete, timeout=timeout, interval=0.5)
        finally:
            out, _ = pinger.communicate("", timeout=120)
        last = max(d["output"]["finished_at"] for d in done.values())
        samples = json.loads(out)
        failed = [s for s in samples if s[2] != 200]
        if failed:
            raise RuntimeError(
                f"{len(failed)} of {len(samples)} pings failed (first: status {failed[0][2]})"
            )
        idle = [s[1] for s in samples if s[0] < first]
        busy = [s[1] for s in samples if first <= s[0] <= last]
        running = [s[1] for s in samples if created <= s[0] <= last]
        if not busy:
            raise RuntimeError("no ping was sent while the workflows ran")
        return {
            "p50_ms": pct(busy, 50),
            "p99_ms": pct(busy, 99),
            "max_ms": max(busy),
            "pings": len(busy),
            "p99_running_ms": pct(running, 99),
            "idle_p50_ms": pct(idle, 50),
            "steps_s": n * k * 1000 / (last - first),
        }

    return run


def peer_drive(n: int, k: int, c: int) -> Callable[[Target, Api], dict[str, Any]]:
    """bench/wrangler/bench_drive.py (default open mode: C threads create, 4 threads poll
    GET /status) against its Worker, both run unchanged on both servers."""

    def run(target: Target, api: Api) -> dict[str, Any]:
        command = [
            sys.executable, str(find_peer() / "bench_drive.py"), "--base", target.url,
            "-n", str(n), "-k", str(k), "-c", str(c), "--server-pgid", str(target.pgid),
            "--timeout", "600", "--json",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=700)
        lines = result.stdout.strip().splitlines()
        if not lines:
            raise RuntimeError(f"bench_drive.py printed nothing: {result.stderr[-500:]}")
        figures = json.loads(lines[-1])
        if figures["completed"] != n:
            raise RuntimeError(
                f"bench_drive.py: {figures['completed']} of {n} completed, "
                f"first failures {figures.get('first_failures')}"
            )
        return {
            "inst_s": figures["instances_per_s"],
            "steps_s": figures["steps_per_s"],
            "p50_s": figures["latency_engine_s"]["p50"],
            "p99_s": figures["latency_engine_s"]["p99"],
            "cpu_ms_step": figures.get("server_cpu_ms_per_step"),
        }

    return run


def workloads(
    quick: bool, big: bool, sleepers: int | None = None, million: int = 1_000_000
) -> list[Workload]:
    """The matrix. --quick shrinks sizes; --big adds 10,000 and 100,000 day-long sleepers
    (celld only); `sleepers` sets create_batch_sleepers' size on celld, `million`
    hibernated_million's (an opt-in workload)."""
    q = quick
    tput_cols = [
        ("inst_s", "inst/s", True),
        ("steps_s", "steps/s", True),
        ("p50_s", "p50 s", False),
        ("p99_s", "p99 s", False),
        ("cpu_ms_step", "CPU ms/step", False),
    ]
    n10, n100 = (100, 20) if q else (200, 50)
    n_sleepers = sleepers or (5_000 if q else 50_000)
    n_sleepers_wrangler = 100 if q else 200
    n_busy = 300 if q else 1_000
    n_one_client = 5_000 if q else HIBERNATED_20K
    sleeper_cols = [
        ("inst_s", "to their sleep inst/s", True),
        ("reached", "reached their sleep", None),
        ("accept_s", "creates answered inst/s", True),
        ("base_mib", "idle MiB", False),
        ("peak_mib", "peak MiB", None),
    ]
    latency_cols = [("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False),
                    ("max_ms", "max ms", False)]  # fmt: skip
    too_many = (
        "not run on wrangler: every instance is a SQLite-backed Durable Object "
        "(~0.5 MB on disk, all kept in memory, ~15-50 instances/s to create); "
        "{n} would take too long for one run"
    )
    items = [
        Workload("throughput_k1", f"throughput N={200 if not q else 100} K=1 C=20",
                 throughput(200 if not q else 100, 1, 20), columns=tput_cols),
        Workload("throughput_k10", f"throughput N={n10} K=10 C=20",
                 throughput(n10, 10, 20), columns=tput_cols),
        Workload("throughput_k100", f"throughput N={n100} K=100 C=20",
                 throughput(n100, 100, 20), columns=tput_cols),
        Workload("drive_k10", f"bench_drive.py and its Worker, -n {n10} -k 10 -c 20",
                 peer_drive(n10, 10, 20), columns=tput_cols, project=DRIVE_WORKER),
        Workload("drive_k100", f"bench_drive.py and its Worker, -n {n100} -k 100 -c 20",
                 peer_drive(n100, 100, 20), columns=tput_cols, project=DRIVE_WORKER),
        Workload("create_to_complete",
                 f"create to complete, K=10, one at a time ({50 if q else 200} in turn)",
                 create_to_complete(50 if q else 200, 10),
                 columns=latency_cols + [("create_ms", "create answered p50 ms", False)]),
        Workload("create_batch_sleepers",
                 f"createBatch of day-long sleepers, 4 clients: {n_sleepers:,} "
                 f"(wrangler dev: {n_sleepers_wrangler})",
                 create_batch_sleepers(n_sleepers, n_sleepers_wrangler, 4),
                 columns=sleeper_cols + [
                          ("rss_mib", "RSS once asleep MiB", None),
                          ("budget_mib", "budget MiB", None),
                          ("max_resident", "resident cap", None)]),
        Workload("sleepers_one_client",
                 f"createBatch of day-long sleepers, one sequential client: "
                 f"{n_one_client:,} (wrangler dev: {n_sleepers_wrangler})",
                 create_batch_sleepers(n_one_client, n_sleepers_wrangler, 1, settle_s=10),
                 columns=sleeper_cols + [("n", "created", None),
                                         ("rss_mb", "RSS 10 s after the last fell asleep MB",
                                          None)]),
        Workload("hibernated_million",
                 f"createBatch of day-long sleepers, 4 clients: {million:,} hibernated",
                 create_batch_sleepers(million, million, 4, settle_s=10),
                 wrangler_skip=too_many.format(n=f"{million:,}"), opt_in=True,
                 columns=sleeper_cols + [("n", "created", None),
                                         ("rss_mb", "RSS 10 s after the last fell asleep MB",
                                          None)]),
        Workload("http_under_load",
                 f"GET /ping every 5 ms while {n_busy:,} instances x 10 steps run",
                 http_under_load(n_busy, 10, 5),
                 columns=latency_cols + [("pings", "pings", None),
                                         ("p99_running_ms", "p99 once creates answered ms",
                                          False),
                                         ("idle_p50_ms", "idle p50 ms", False),
                                         ("steps_s", "steps/s meanwhile", True)]),
        Workload("long_1000", "single workflow, 1,000 steps", long_workflow(1000, 300),
                 columns=[("wall_s", "s", False), ("steps_s", "steps/s", True),
                          ("cpu_ms_step", "CPU ms/step", False)]),
        Workload("long_10000", "single workflow, 10,000 steps", long_workflow(10_000, 600),
                 columns=[("wall_s", "s", False), ("steps_s", "steps/s", True),
                          ("cpu_ms_step", "CPU ms/step", False)]),
        Workload("at_once_100", "100 instances at once, K=50", at_once(100, 50),
                 columns=[("steps_s", "steps/s", True), ("cpu_ms_step", "CPU ms/step", False)]),
        Workload("at_once_1000", "1,000 instances at once, K=10", at_once(1000, 10),
                 columns=[("steps_s", "steps/s", True), ("cpu_ms_step", "CPU ms/step", False)]),
        Workload("replay", "replay after restart: 1,000 / 5,000 recorded steps",
                 replay((1000, 5000), 600),
                 columns=[("event_k0_ms", "K=0 ms", False), ("ms_1000", "1k ms", False),
                          ("us_step_1000", "us/step 1k", False), ("ms_5000", "5k ms", False),
                          ("us_step_5000", "us/step 5k", False)]),
        Workload("wake_lag", f"sleep wake lag, {200 if q else 1000} x 2 s (resident)",
                 wake_lag(200 if q else 1000, 2000),
                 columns=[("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False),
                          ("max_ms", "max ms", False)]),
        Workload("wake_lag_hibernated",
                 f"sleep wake lag, {200 if q else 1000} x 2 s (hibernated: residency 500 ms)",
                 wake_lag(200 if q else 1000, 2000),
                 wrangler_skip="not run on wrangler: it never hibernates (same as the row above)",
                 celld_env={"CELLD_ALARM_RESIDENT_MS": "500"},
                 columns=[("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False),
                          ("max_ms", "max ms", False)]),
        Workload("wake_due_at_once",
                 f"sleep wake lag, {200 if q else 1000} due at the same moment "
                 "(hibernated: residency 500 ms)",
                 wake_due_at_once(200 if q else 1000, 10 if q else 15),
                 wrangler_skip="not run on wrangler: it never hibernates",
                 celld_env={"CELLD_ALARM_RESIDENT_MS": "500"},
                 columns=latency_cols + [("asleep_before_s", "all asleep, s before due", None),
                                         ("hibernated", "hibernated before due", None)]),
        Workload("event_resident", "event latency, 200 waiting (resident, 10 min timeout)",
                 event_latency(200, "10 minutes"),
                 columns=[("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False),
                          ("max_ms", "max ms", False)]),
        Workload("event_hibernated", "event latency, 200 waiting (hibernated, 1 day timeout)",
                 event_latency(200, "1 day"),
                 columns=[("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False),
                          ("max_ms", "max ms", False)]),
        Workload("binary_values",
                 f"binary step results, create to complete, one at a time ({5 if q else 12} "
                 "each): 1 step of 950,000 bytes; 20 steps of 64 KiB",
                 binary_values(5 if q else 12),
                 columns=[("mb_p50_ms", "950 kB p50 ms", False),
                          ("mb_max_ms", "950 kB max ms", False),
                          ("mb_seen_p50_ms", "950 kB polled p50 ms", False),
                          ("mb_cpu_ms", "950 kB server CPU ms/inst", False),
                          ("k64_p50_ms", "20 x 64 KiB p50 ms", False),
                          ("k64_max_ms", "20 x 64 KiB max ms", False),
                          ("k64_seen_p50_ms", "20 x 64 KiB polled p50 ms", False),
                          ("k64_cpu_ms", "20 x 64 KiB server CPU ms/inst", False)]),
        Workload("memory_resident_1k", "memory: 1,000 waiting, resident (30 min timeout)",
                 memory(1000, "WAITER", {"steps": 0, "timeout": "30 minutes"}, 2),
                 columns=[("inst_s", "created/s", True), ("peak_mib", "peak MiB", False),
                          ("rss_mib", "RSS MiB", False), ("kib_inst", "KiB/inst", False)]),
    ]  # fmt: skip
    if big:
        items.append(
            Workload("memory_10k", "memory: 10,000 sleeping 1 day (hibernated)",
                     memory(10_000, "SLEEPER", {"sleep_ms": 86_400_000}, 3),
                     wrangler_skip=too_many.format(n="10,000"),
                     columns=[("inst_s", "created/s", True), ("peak_mib", "peak MiB", False),
                              ("rss_mib", "RSS MiB", False), ("kib_inst", "KiB/inst", False)])
        )  # fmt: skip
        items.append(
            Workload("memory_100k", "memory: 100,000 sleeping 1 day (hibernated)",
                     memory(100_000, "SLEEPER", {"sleep_ms": 86_400_000}, 5),
                     wrangler_skip=too_many.format(n="100,000"),
                     columns=[("create_s", "create s", False), ("inst_s", "created/s", True),
                              ("peak_mib", "peak MiB", False), ("rss_mib", "RSS MiB", False),
                              ("kib_inst", "KiB/inst", False)])
        )  # fmt: skip
    return items


# -- targets ----------------------------------------------------------------------------

#: The size issue 24's first memory target names: 20,000 hibernated sleepers.
HIBERNATED_20K = 20_000


@dataclass
class Goal:
    """A figure's target, judged from the measured figures, never written by hand.

    The bound is `bound` (a number), or celld's own figure `bound_key` from the same workload
    (a budget it reports), or `times_wrangler` times wrangler dev's figure from the same run.
    A target that names a size (`at_n`: "20,000 hibernated") is judged only when celld's
    run had that size (its figure `n`), since the figure grows with it.
    """

    label: str
    workload: str
    figure: str
    #: "<", "<=" or ">=": celld's figure against the bound
    op: str
    unit: str = ""
    bound: float | None = None
    bound_key: str | None = None
    times_wrangler: float | None = None
    at_n: int | None = None

    def threshold(self, celld: Result, wrangler: Result | None) -> float | None:
        if self.bound is not None:
            return self.bound
        if self.bound_key is not None:
            value = celld.figures.get(self.bound_key)
            return float(value) if isinstance(value, (int, float)) else None
        if self.times_wrangler is not None and wrangler is not None and not wrangler.skipped:
            value = wrangler.figures.get(self.figure)
            return self.times_wrangler * value if isinstance(value, (int, float)) else None
        return None

    def describe(self, celld: Result, wrangler: Result | None) -> str:
        """The target as a reader wants it: the rule, and the number it comes to here."""
        limit = self.threshold(celld, wrangler)
        op = {"<": "<", "<=": "≤", ">=": "≥"}[self.op]
        unit = f" {self.unit}" if self.unit else ""
        if self.times_wrangler is not None:
            come_to = f" (= {fmt(limit)}{unit})" if limit is not None else ""
            return f"{op} {self.times_wrangler:g}x wrangler dev{come_to}"
        if self.bound_key is not None:
            come_to = f" = {fmt(limit)}{unit}" if limit is not None else " (not measured)"
            return f"{op} {self.bound_key.removesuffix('_mib')}{come_to}"
        return f"{op} {fmt(float(limit)) if limit is not None else '-'}{unit}"

    def met(self, celld: Result, wrangler: Result | None) -> str:
        value = None if celld.skipped else celld.figures.get(self.figure)
        ran = celld.figures.get("n")
        if self.at_n is not None and value is not None and ran != self.at_n:
            return f"not judged: ran {fmt(ran)}, the target is at {self.at_n:,}"
        limit = self.threshold(celld, wrangler)
        if not isinstance(value, (int, float)) or limit is None:
            return "not measured"
        ok = {"<": value < limit, "<=": value <= limit, ">=": value >= limit}[self.op]
        return "yes" if ok else "no"


def goals() -> list[Goal]:
    """Issue 24's targets, in its order; every one is listed in the report, run or not."""
    return [
        Goal("steps/s", "throughput_k10", "steps_s", ">=", "steps/s", times_wrangler=20),
        Goal("steps/s", "throughput_k100", "steps_s", ">=", "steps/s", times_wrangler=20),
        Goal("steps/s", "drive_k10", "steps_s", ">=", "steps/s", times_wrangler=20),
        Goal("steps/s", "drive_k100", "steps_s", ">=", "steps/s", times_wrangler=20),
        Goal("server CPU per instance, its whole life (create, run, status polls)",
             "throughput_k1", "cpu_ms_step", "<=", "ms", bound=1),
        Goal("instances/s until all reached their sleep", "sleepers_one_client", "inst_s",
             ">=", "inst/s", bound=1000),
        Goal("RSS 10 s after the last fell asleep", "sleepers_one_client", "rss_mb", "<",
             "MB", bound=100, at_n=HIBERNATED_20K),
        Goal("RSS 10 s after the last fell asleep", "hibernated_million", "rss_mb", "<", "MB",
             bound=500, at_n=1_000_000),
        Goal("950 kB p50", "binary_values", "mb_p50_ms", "<=", "ms", times_wrangler=1.5),
        Goal("20 x 64 KiB p50", "binary_values", "k64_p50_ms", "<=", "ms",
             times_wrangler=1.5),
        Goal("p99", "wake_due_at_once", "p99_ms", "<", "ms", bound=250),
        Goal("p99 of GET /ping", "http_under_load", "p99_ms", "<", "ms", bound=10),
    ]  # fmt: skip


def earlier_goals() -> list[Goal]:
    """Issue 17's targets that issue 24's do not repeat or tighten (its steps/s and plain
    HTTP targets are issue 24's too; its hibernated wake lag, p99 < 500 ms of sleepers due
    over the time they were created, stays: issue 24's is of 1,000 due at once)."""
    return [
        Goal("p50", "create_to_complete", "p50_ms", "<", "ms", bound=10),
        Goal("instances/s until all reached their sleep", "create_batch_sleepers", "inst_s",
             ">=", "inst/s", bound=1000),
        Goal("peak RSS", "create_batch_sleepers", "peak_mib", "<=", "MiB",
             bound_key="budget_mib"),
        Goal("RSS once asleep", "create_batch_sleepers", "rss_mib", "<=", "MiB",
             bound_key="budget_mib"),
        Goal("us per recorded step at 5,000", "replay", "us_step_5000", "<=", "us", bound=5),
        Goal("p99", "wake_lag", "p99_ms", "<", "ms", bound=100),
        Goal("p99", "wake_lag_hibernated", "p99_ms", "<", "ms", bound=500),
    ]  # fmt: skip


def goals_table(
    results: list[tuple[Workload, Result, Result | None]],
    targets: list[Goal],
    every: dict[str, Workload] | None = None,
) -> str:
    """figure | target | celld | wrangler dev | ratio | met, for the workloads that ran; with
    `every` (all workloads by key), a target whose workload did not run is listed too, as
    "not run"."""
    ran = {w.key: (w, c, x) for w, c, x in results}
    lines = ["| figure | target | celld | wrangler dev | celld advantage | met |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for goal in targets:
        if goal.workload not in ran:
            if every is not None and goal.workload in every:
                workload = every[goal.workload]
                why = "opt-in: `--only " + workload.key + "`" if workload.opt_in else "not run"
                lines.append(
                    f"| {workload.title}: {goal.label} | {goal.describe(Result(), None)} "
                    f"| {why} |  |  | not run |"
                )
            continue
        workload, celld, wrangler = ran[goal.workload]
        column = next(c for c in workload.columns if c[0] == goal.figure)
        c = celld.skipped if celld.skipped else fmt(celld.figures.get(goal.figure))
        if wrangler is None:
            w = "(not asked: --wrangler)"
        elif wrangler.skipped:
            w = wrangler.skipped
        else:
            w = fmt(wrangler.figures.get(goal.figure))
        advantage = ratio(column, celld, wrangler)
        lines.append(
            f"| {workload.title}: {goal.label} | {goal.describe(celld, wrangler)} | {c} | {w} "
            f"| {advantage} | {goal.met(celld, wrangler)} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


# -- running and reporting ------------------------------------------------------------------


def run_one(workload: Workload, target: Target) -> Result:
    state = target.fresh_state(workload.key)
    env = workload.celld_env if isinstance(target, CelldTarget) else {}
    try:
        target.start(state, env, project_copy(workload, target.workdir))
    except Exception as error:  # noqa: BLE001 - reported in the table
        return Result(skipped=f"server did not start: {error}")
    api = Api(target.url)
    try:
        figures = workload.run(target, api)
        return Result({k: v for k, v in figures.items() if not k.startswith("_")})
    except Exception as error:  # noqa: BLE001 - one failed workload does not stop the rest
        return Result(skipped=f"failed: {type(error).__name__}: {str(error)[:200]}")
    finally:
        api.close()
        target.stop()
        shutil.rmtree(state, ignore_errors=True)


def project_copy(workload: Workload, work: Path) -> Path:
    """The project a workload serves: bench/project, or a copy of its own in the work folder
    (one copy per run; a path under "wrangler/" is in bench/wrangler)."""
    if workload.project is None:
        return PROJECT
    source = workload.project
    if source.parts[0] == "wrangler":
        source = find_peer().joinpath(*source.parts[1:])
    copy = work / f"project-{workload.project.as_posix().replace('/', '-')}"
    if not copy.exists():
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".wrangler", "node_modules"))
    return copy


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(column: tuple[str, str, bool | None], celld: Result, wrangler: Result | None) -> str:
    """How many times better celld is (>1: celld better), for this column."""
    key, _, higher_better = column
    if higher_better is None or wrangler is None or wrangler.skipped or celld.skipped:
        return ""
    a, b = celld.figures.get(key), wrangler.figures.get(key)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b <= 0:
        return ""
    return f"{(a / b) if higher_better else (b / a):.1f}x"


def table(results: list[tuple[Workload, Result, Result | None]], with_wrangler: bool) -> str:
    lines = ["| workload | figure | celld | wrangler dev | celld advantage |",
             "|---|---|---|---|---|"]  # fmt: skip
    for workload, celld, wrangler in results:
        first = True
        for column in workload.columns:
            key, label, _ = column
            name = workload.title if first else ""
            c = celld.skipped if celld.skipped else fmt(celld.figures.get(key))
            if not with_wrangler:
                w = "(not asked: --wrangler)"
            elif wrangler is None or wrangler.skipped:
                w = (wrangler.skipped if wrangler else workload.wrangler_skip) if first else ""
            else:
                w = fmt(wrangler.figures.get(key))
            if celld.skipped and not first:
                continue
            lines.append(f"| {name} | {label} | {c} | {w} | {ratio(column, celld, wrangler)} |")
            first = False
    return "\n".join(lines)


def machine() -> dict[str, str]:
    model = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cores": str(os.cpu_count()),
        "memory": f"{memory / 1024**3:.1f} GiB",
        "cpu": model,
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "disk under state": disk_of(Path(tempfile.gettempdir())),
    }


def disk_of(path: Path) -> str:
    with contextlib.suppress(OSError):
        best = ("", "")
        with open("/proc/mounts") as f:
            for line in f:
                device, mount, fstype = line.split()[:3]
                if str(path.resolve()).startswith(mount) and len(mount) > len(best[0]):
                    best = (mount, f"{fstype} ({device}) at {mount}")
        return best[1] or "unknown"
    return "unknown"


def versions(wrangler: WranglerTarget | None) -> dict[str, str]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    out = {
        "celld": f"{version('celld')} (git {git_head()})",
        "python": platform.python_version(),
        "quickjs-ng": version("quickjs-ng"),
        "sqlite": sqlite3.sqlite_version,
        "uvicorn": version("uvicorn"),
        "sqlite sync mode": os.environ.get("CELLD_SQLITE_SYNC", "FULL"),
    }
    if wrangler is not None:
        out["wrangler dev"] = wrangler.version()
    return out


def git_head() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return result.stdout.strip() + (" + uncommitted changes" if dirty else "")
    return "unknown"


def load_average() -> tuple[float, float, float]:
    """The machine's 1-, 5- and 15-minute load averages: how busy it was besides the run."""
    return os.getloadavg()


def describe_load(start: tuple[float, ...], end: tuple[float, ...]) -> str:
    return (
        f"{start[0]:.2f} at start, {end[0]:.2f} at end (1 minute; 5 and 15 minutes: "
        f"{start[1]:.2f} / {start[2]:.2f} at start, {end[1]:.2f} / {end[2]:.2f} at end; "
        f"{os.cpu_count()} cores)"
    )


def report(
    results: list[tuple[Workload, Result, Result | None]],
    wrangler: WranglerTarget | None,
    command: str,
    seconds: float,
    every: dict[str, Workload] | None = None,
    load: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
) -> str:
    """Issue 24's targets (every one, "not run" where its workload did not run), issue 17's
    remaining ones (those that ran), the command, the machine and its load, every figure."""
    facts = {**machine(), **versions(wrangler)}
    head = "\n".join(f"- {k}: {v}" for k, v in facts.items())
    loadline = f"Load average: {describe_load(*load)}\n\n" if load else ""
    judged = "Judged from the figures below, same run; advantage = how many times better celld is."
    sections = ""
    targets = goals_table(results, goals(), every)
    if targets:
        sections += f"## Targets (issue 24)\n\n{judged}\n\n{targets}\n\n"
    earlier = goals_table(results, earlier_goals())
    if earlier:
        sections += f"## Earlier targets (issue 17)\n\n{judged}\n\n{earlier}\n\n"
    return (
        f"Command: `{command}` ({seconds / 60:.1f} min)\n\n{loadline}{sections}{head}\n\n"
        f"## All figures\n\n{table(results, wrangler is not None)}\n"
    )


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="celld-bench-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wrangler", action="store_true", help="also run against wrangler dev")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument(
        "--big", action="store_true", help="add 10,000 and 100,000 day-long sleepers"
    )
    parser.add_argument(
        "--sleepers",
        type=int,
        default=None,
        help="create_batch_sleepers' size on celld (default 50,000; --quick 5,000)",
    )
    parser.add_argument(
        "--million",
        type=int,
        default=1_000_000,
        help="hibernated_million's size (opt-in: --only hibernated_million; judged at 1,000,000)",
    )
    parser.add_argument(
        "--only", default="", help="comma-separated workload keys (opt-in ones run only so)"
    )
    parser.add_argument("--list", action="store_true", help="list workload keys and exit")
    parser.add_argument(
        "--all", action="store_true", help="every workload, the opt-in ones too (one whole run)"
    )
    parser.add_argument("--threads", type=int, default=None, help="celld run --threads")
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    parser.add_argument("--json", type=Path, help="write raw figures here")
    parser.add_argument(
        "--wrangler-cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "celld-bench",
        help="folder for wrangler dev's pid files, logs and install (start.sh's WRANGLER_DEV_DIR)",
    )
    parser.add_argument("--keep", action="store_true", help="keep state folders and logs")
    args = parser.parse_args()
    chosen = workloads(args.quick, args.big, args.sleepers, args.million)
    every = {w.key: w for w in chosen}
    if args.list:
        for w in chosen:
            print(f"{w.key:24s} {w.title}{' (opt-in: --only)' if w.opt_in else ''}")
        return
    if args.only:
        keys = set(args.only.split(","))
        unknown = keys - {w.key for w in chosen}
        if unknown:
            parser.error(f"unknown workload keys {sorted(unknown)} (--list shows them)")
        chosen = [w for w in chosen if w.key in keys]
    elif not args.all:
        chosen = [w for w in chosen if not w.opt_in]
    command = "python bench/run.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    started = time.monotonic()
    load_start = load_average()
    print(f"load average at start: {load_start[0]:.2f} (1 minute)", file=sys.stderr)
    results: list[tuple[Workload, Result, Result | None]] = []
    with workdir(args.keep) as work:
        celld = CelldTarget(work, args.threads)
        wrangler = WranglerTarget(work, args.wrangler_cache) if args.wrangler else None
        for workload in chosen:
            print(f"[{time.monotonic() - started:6.0f}s] {workload.key}: celld", file=sys.stderr)
            c = run_one(workload, celld)
            print(f"         {c.figures or c.skipped}", file=sys.stderr)
            w: Result | None = None
            if wrangler is not None:
                if workload.wrangler_skip:
                    w = Result(skipped=workload.wrangler_skip)
                else:
                    print(f"[{time.monotonic() - started:6.0f}s] {workload.key}: wrangler dev",
                          file=sys.stderr)  # fmt: skip
                    w = run_one(workload, wrangler)
                    print(f"         {w.figures or w.skipped}", file=sys.stderr)
            results.append((workload, c, w))
        load = (load_start, load_average())
        text = report(results, wrangler, command, time.monotonic() - started, every, load)
    print(text)
    if args.out:
        args.out.write_text(
            "# Benchmark results\n\nProduced by bench/run.py (see bench/README.md); "
            "figures are from one run on the machine below.\n\n" + text
        )
    if args.json:
        raw = {
            w.key: {"title": w.title, "celld": vars(c), "wrangler": vars(x) if x else None}
            for w, c, x in results
        }
        args.json.write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
