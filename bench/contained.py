"""Figures for hostile Worker code (tests/projects/hostile, limits.cpu_ms = 2,000).

    python bench/contained.py

Starts `celld run` on the hostile test project and prints: /ping latency while two
requests run away (a microtask loop, a busy loop, a storm of CPU-burning timers) and
how long the runaways took to be stopped; the server's CPU after a request left 5,000
zero-delay intervals behind; RSS around six concurrent 100 MB uploads.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.celld_server import CelldServer  # noqa: E402
from tests.e2e.hostile import cpu_share_over, in_background, pinging, rss_bytes  # noqa: E402

MB = 1024 * 1024


def main() -> None:
    server = CelldServer(REPO / "tests" / "projects" / "hostile", Path(tempfile.mkdtemp()) / "s")
    server.start()
    try:

        def get(path: str) -> httpx.Response:
            with httpx.Client(base_url=server.url, timeout=120) as client:
                return client.get(path)

        for path in ("/microtask-loop", "/spin", "/timer-storm-hang"):
            with pinging(server) as pings:
                started = time.monotonic()
                first = in_background(lambda p=path: get(p))
                second = in_background(lambda p=path: get(p))
                codes = (first().status_code, second().status_code)
                took = time.monotonic() - started
            pings.sort()
            print(
                f"{path}: two runaways ended {codes} after {took:.1f} s; "
                f"/ping p50 {pings[len(pings) // 2] * 1000:.0f} ms, max {pings[-1] * 1000:.0f} ms"
            )
        get("/timer-storm")
        print(f"after 5,000 leftover intervals: {cpu_share_over(server, 2.0) * 100:.0f}% of a core")

        def upload() -> httpx.Response:
            def chunks():  # 100 blocks of 1 MiB
                block = bytes(MB)
                for _ in range(100):
                    yield block

            with httpx.Client(base_url=server.url, timeout=300) as client:
                headers = {"content-length": str(100 * MB)}
                return client.post("/drain", content=chunks(), headers=headers)

        baseline = rss_bytes(server)
        peak = baseline
        waiters = [in_background(upload) for _ in range(6)]
        results: list[httpx.Response] = []
        while not results:
            peak = max(peak, rss_bytes(server))
            time.sleep(0.05)
            try:
                results = [wait(0.01) for wait in waiters]
            except AssertionError:
                results = []
        print(
            f"six 100 MB uploads {[r.status_code for r in results]}: RSS {baseline / MB:.0f} MiB "
            f"before, {peak / MB:.0f} MiB peak, {rss_bytes(server) / MB:.0f} MiB after"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
