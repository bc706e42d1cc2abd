"""Queue messages per second through a Worker: sent by fetch(), consumed by queue().

    python bench/queues.py                       # starts `celld run` on bench/queues_project
    python bench/queues.py --url http://127.0.0.1:8931   # a server already running it
                                                 # (e.g. wrangler dev on a copy of the project)
    python bench/queues.py --workers 2           # `celld run --workers 2`
    python bench/queues.py --store postgresql://... --nodes 2   # 2 nodes on one database

Two figures per target, measured from outside over HTTP with C concurrent clients:

* **send**: requests of `POST /send?n=10` (ten awaited `send()` calls each): messages
  acknowledged per second (under celld each one is committed, one fsync, before it resolves);
* **sendBatch + drain**: requests of `POST /batch?n=100` (one `sendBatch()` of 100), then
  polling the queue's `metrics()` until its backlog is empty: messages per second from the
  first send to the empty backlog (stored, delivered in batches of 100, acknowledged).

Wall-clock figures move with the machine's load; run targets one after the other.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

PROJECT = Path(__file__).resolve().parent / "queues_project"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_celld(state: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "celld", "run", str(PROJECT), "--port", str(port),
               "--persist-to", str(state), "--log-level", "warn", *extra]  # fmt: skip
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/backlog", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("celld did not start")


def hammer(urls: list[str], path: str, requests: int, concurrency: int) -> float:
    """Seconds to answer `requests` POSTs of `path` with `concurrency` clients (client i
    sends to node i mod the number of nodes)."""

    def one(i: int) -> None:
        with httpx.Client(base_url=urls[i % len(urls)], timeout=60) as client:
            for _ in range(requests // concurrency):
                response = client.post(path)
                response.raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(concurrency)))
    return time.perf_counter() - started


def drain(url: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/backlog", timeout=30).json()["backlogCount"] == 0:
            return
        time.sleep(0.02)
    raise RuntimeError("the backlog did not drain")


def measure(urls: list[str], messages: int, concurrency: int) -> dict[str, float]:
    url = urls[0]
    drain(url)
    send_requests = max(concurrency, messages // 10)
    sent = send_requests // concurrency * concurrency * 10
    send_s = hammer(urls, "/send?n=10", send_requests, concurrency)
    drain(url)
    batch_requests = max(concurrency, messages // 100)
    batched = batch_requests // concurrency * concurrency * 100
    started = time.perf_counter()
    hammer(urls, "/batch?n=100", batch_requests, concurrency)
    drain(url)
    drain_s = time.perf_counter() - started
    return {
        "send msgs": sent,
        "send msg/s": sent / send_s,
        "sendBatch+drain msgs": batched,
        "sendBatch+drain msg/s": batched / drain_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a server already serving bench/queues_project")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, help="celld run --workers N")
    parser.add_argument("--store", help="a postgresql:// store shared by --nodes nodes")
    parser.add_argument("--nodes", type=int, default=1)
    args = parser.parse_args()
    processes: list[subprocess.Popen[bytes]] = []
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="celld-queues-bench-") as tmp:
        urls = [args.url] if args.url else []
        extra = ("--workers", str(args.workers)) if args.workers else ()
        for node in range(args.nodes if not args.url else 0):
            store = ("--store", args.store) if args.store else ()
            process, url = start_celld(Path(tmp) / f"state{node}", *extra, *store)
            processes.append(process)
            urls.append(url)
        try:
            results = measure(urls, args.messages, args.concurrency)
        finally:
            for process in processes:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(30)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    for name, value in results.items():
        print(f"{name}: {value:,.0f}")


if __name__ == "__main__":
    main()
