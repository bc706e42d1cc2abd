"""HTTP benchmark of the Worker runtime: a hello-world Worker at 1 and 32 concurrent clients.

    python bench/http_hello.py [--requests 3000] [--wrangler]

Starts `celld run examples/hello` (and, with --wrangler, `wrangler dev` on the same
project through bench/wrangler/start.sh) and loads it with `wrk` (Debian package
`wrk`; a Python client on the same 2 cores cannot keep up, so without wrk the figures
fall back to an asyncio httpx client and mostly measure that client), then prints
requests/s and p50/p99 latency for each. It
also reports the cost of creating an isolate with a realistic Worker loaded (the
signup example's bundle behind the whole runtime). The client runs on the same 2-core
machine as the server, so absolute figures include its CPU; ratios are what compare.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.celld_server import CelldServer, free_port  # noqa: E402

PEER = REPO / "bench" / "wrangler"  # start.sh / stop.sh for wrangler dev


async def measure(url: str, total: int, concurrency: int) -> dict[str, float]:
    latencies: list[float] = []
    remaining = total
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        for _ in range(50):  # warm up
            (await client.get(url)).raise_for_status()

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                response = await client.get(url, headers={"user-agent": "bench"})
                latencies.append(time.perf_counter() - started)
                if response.status_code != 200:
                    raise RuntimeError(f"{url}: HTTP {response.status_code}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1000,
    }


def isolate_creation_ms(samples: int = 30) -> tuple[float, int]:
    """Median time to create an isolate with the signup example loaded, and its memory."""
    import quickjs

    from celld.isolate.program import build_program

    project = REPO / "examples" / "signup"
    program = build_program(project / "src" / "index.js", root=project)
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        context = quickjs.Context()
        context.eval(program.script.source)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), int(context.memory()["memory_used_size"])


def _ms(text: str) -> float:
    value = float(text.rstrip("usm"))
    if text.endswith("us"):
        return value / 1000
    if text.endswith("ms"):
        return value
    return value * 1000  # seconds


def measure_wrk(
    url: str, concurrency: int, seconds: int, extra: tuple[str, ...] = ()
) -> dict[str, float]:
    """Run wrk (with `extra` arguments: a Lua script, a timeout) and read its summary (it
    prints a fixed text format)."""
    threads = min(2, concurrency)
    output = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{concurrency}", f"-d{seconds}s", "--latency", *extra, url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = {}
    for line in output.splitlines():
        fields = line.split()
        if line.startswith("Requests/sec:"):
            result["rps"] = float(fields[1])
        elif fields[:1] == ["50%"]:
            result["p50_ms"] = _ms(fields[1])
        elif fields[:1] == ["99%"]:
            result["p99_ms"] = _ms(fields[1])
    if "Non-2xx" in output or "Socket errors" in output:
        raise RuntimeError(f"wrk saw errors:\n{output}")
    return result


def run_target(name: str, url: str, total: int) -> list[tuple[str, int, dict[str, float]]]:
    rows = []
    for concurrency in (1, 32):
        if shutil.which("wrk"):
            measure_wrk(f"{url}/warm-up", concurrency, 1)
            result = measure_wrk(f"{url}/some/path", concurrency, 8)
        else:
            result = asyncio.run(measure(f"{url}/some/path", total, concurrency))
        rows.append((name, concurrency, result))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--wrangler", action="store_true", help="also measure wrangler dev")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as state:
        server = CelldServer(REPO / "examples" / "hello", Path(state) / "s").start()
        try:
            rows += run_target("celld", server.url, args.requests)
        finally:
            server.stop()
    if args.wrangler:
        port = free_port()
        with tempfile.TemporaryDirectory() as state:
            subprocess.run(
                [str(PEER / "start.sh"), str(REPO / "examples" / "hello"), str(port), state],
                check=True,
                capture_output=True,
                env={"LOG_LEVEL": "warn", "FRESH": "1", "PATH": "/usr/local/bin:/usr/bin:/bin"},
            )
            try:
                rows += run_target("wrangler dev", f"http://127.0.0.1:{port}", args.requests)
            finally:
                subprocess.run([str(PEER / "stop.sh"), str(port)], capture_output=True)

    client = (
        "wrk, 8 s per row" if shutil.which("wrk") else f"httpx, {args.requests} requests per row"
    )
    print(f"hello-world Worker; load from {client} on the same machine")
    print(f"{'target':<14}{'clients':>8}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}")
    for name, concurrency, r in rows:
        print(f"{name:<14}{concurrency:>8}{r['rps']:>10.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")
    by_key = {(name, c): r for name, c, r in rows}
    for concurrency in (1, 32):
        if ("wrangler dev", concurrency) in by_key:
            ratio = (
                by_key[("celld", concurrency)]["rps"] / by_key[("wrangler dev", concurrency)]["rps"]
            )
            print(f"celld / wrangler dev at {concurrency} clients: {ratio:.2f}x req/s")
    ms, memory = isolate_creation_ms()
    print(
        f"isolate with runtime + signup example loaded: {ms:.1f} ms to create, "
        f"{memory / 1024:.0f} KiB"
    )


if __name__ == "__main__":
    main()
