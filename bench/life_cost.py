"""Server CPU of a K=1 instance's whole life through `celld run`, and where it goes.

    python bench/life_cost.py [--lives 200] [--clients 20] [--rounds 3] [--profile out.raw]
                              [--repo PATH]

The life `bench/run.py --only throughput_k1` prices: `celld run bench/project --workers 1`
(``--log-level warning``), then per round `--lives` BenchWorkflow instances of one step,
created through the Worker's `POST /create` by `--clients` concurrent clients, then polled
through `POST /statuses` (100 ids a request, each id `env.BENCH.get(id)` then
`instance.status()`) every 0.25 s until all are complete. Per life: the server's CPU
(/proc, by thread: the event loop's, the JS threads', the SQLite threads'), its HTTP
requests and status lookups, and the Worker's turns on the event loop and on a JS thread
(`celld_worker_turns_total`, when the server has it: each turn on a thread is a crossing
there and back). A first round warms the server up and is not reported.

`--repo` runs the server from another checkout (to set two versions side by side);
`--profile` runs py-spy (``--format raw``, ``--threads``) on the server during the last
round. The load average is printed with every figure: the machine may be shared.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.request_cost import cpu_seconds, loadavg, served  # noqa: E402

TURNS = re.compile(r'^celld_worker_turns_total\{where="(\w+)"\} (\d+)', re.MULTILINE)


def thread_names(pid: int) -> dict[str, str]:
    """Thread id -> a short name of its kind (from /proc/<pid>/task/*/comm)."""
    out: dict[str, str] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        out[task.name] = "loop" if task.name == str(pid) else re.sub(r"[-_]?\d+(_\d+)?$", "", comm)
    return out


def cpu_by_kind(pid: int) -> dict[str, float]:
    """CPU seconds of `pid`'s threads, summed by kind of thread."""
    names = thread_names(pid)
    out: dict[str, float] = {}
    for tid, kind in names.items():
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[kind] = out.get(kind, 0.0) + (int(stat[11]) + int(stat[12])) / 100
    return out


def turns(client: httpx.Client) -> tuple[int, int] | None:
    found = dict(TURNS.findall(client.get("/cdn-cgi/celld/metrics").text))
    if not found:
        return None
    return int(found.get("loop", 0)), int(found.get("thread", 0))


def one_round(base: str, tag: str, lives: int, clients: int) -> tuple[int, int]:
    """`lives` lives; returns (HTTP requests, status lookups) it took."""
    ids = [f"{tag}-{i}" for i in range(lives)]
    requests = 0
    lookups = 0

    local = threading.local()  # one keep-alive connection per client, as bench/run.py's
    opened: list[httpx.Client] = []

    def create(instance_id: str) -> None:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(base_url=base, timeout=60)
            opened.append(client)
        client.post(
            "/create", params={"wf": "BENCH", "id": instance_id}, json={"steps": 1}
        ).raise_for_status()

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(create, ids))
    for client in opened:
        client.close()
    requests += lives
    pending = ids
    with httpx.Client(base_url=base, timeout=60) as client:
        while pending:
            time.sleep(0.25)
            left = []
            for start in range(0, len(pending), 100):
                chunk = pending[start : start + 100]
                got = client.post("/statuses", params={"wf": "BENCH"}, json=chunk).json()
                requests += 1
                lookups += len(chunk)
                left += [i for i in chunk if got[i].get("status") != "complete"]
            pending = left
    return requests, lookups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lives", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    repo = args.repo.resolve()
    with served(repo, "celld-lifecost-") as (process, base):
        client = httpx.Client(base_url=base, timeout=30)
        one_round(base, "warm", args.lives, args.clients)
        for number in range(args.rounds):
            spy = None
            if args.profile is not None and number == args.rounds - 1:
                spy = subprocess.Popen(
                    ["py-spy", "record", "-r", "500", "-f", "raw", "--threads", "--gil", "-o",
                     str(args.profile), "-p", str(process.pid)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                time.sleep(1)
            turns0 = turns(client)
            cpu0, kinds0 = cpu_seconds(process.pid), cpu_by_kind(process.pid)
            requests, lookups = one_round(base, f"r{number}", args.lives, args.clients)
            time.sleep(0.3)  # the last lives' isolates go back to the pool
            cpu = cpu_seconds(process.pid) - cpu0
            kinds = cpu_by_kind(process.pid)
            turns1 = turns(client)
            if spy is not None:
                spy.send_signal(2)
                spy.wait(30)
            n = args.lives
            split = sorted(((kinds[k] - kinds0.get(k, 0.0)) / n * 1e3, k) for k in kinds)
            parts = ", ".join(f"{k} {ms:.2f}" for ms, k in reversed(split) if ms >= 0.02)
            crossings = ""
            if turns0 is not None and turns1 is not None:
                here = (turns1[0] - turns0[0]) / n
                away = (turns1[1] - turns0[1]) / n
                crossings = f"; Worker turns a life: {here:.2f} on the loop, {away:.2f} on a thread"
            print(
                f"round {number}: {cpu / n * 1e3:.2f} ms CPU a life ({parts}); "
                f"{requests / n:.2f} requests, {lookups / n:.2f} status lookups a life"
                f"{crossings} (load {loadavg()})",
                flush=True,
            )


if __name__ == "__main__":
    main()
