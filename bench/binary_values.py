"""Binary step results: create -> complete of one instance whose steps return ArrayBuffers.

Two workloads (bench/project, BinaryWorkflow): one step returning 950,000 bytes, and 20
steps of 64 KiB each. Runs celld's Service in this process (real isolates, a real SQLite
file with synchronous=FULL, no HTTP), instances one after another, and prints the median
and spread of create -> complete, and the store's size per instance.

    python bench/binary_values.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from celld.project.config import find_config, load_config
from celld.server.service import Service, ServiceOptions

PROJECT = Path(__file__).resolve().parent / "project"
WORKLOADS = {"950 kB x 1": (950_000, 1), "64 KiB x 20": (65_536, 20)}


async def _call(service: Service, method: str, **fields: Any) -> Any:
    assert service.cells is not None
    op = service.cells.ops["wf.binding"]
    return await op({"workflow": "binary-workflow", "method": method, **fields})


async def measure(runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in WORKLOADS}
    with tempfile.TemporaryDirectory() as folder:
        config = load_config(find_config(PROJECT, None))
        service = Service(config, ServiceOptions(persist_to=Path(folder)))
        await service.start()
        try:
            for run in range(runs + 1):  # the first of each is a warm-up
                for name, (size, count) in WORKLOADS.items():
                    instance = f"{name}-{run}".replace(" ", "")
                    params = f'{{"size":{size},"count":{count}}}'
                    started = time.perf_counter()
                    await _call(service, "create", id=instance, params=params)
                    while (await _call(service, "status", id=instance))["status"] != "complete":
                        await asyncio.sleep(0.001)
                    if run:
                        times[name].append((time.perf_counter() - started) * 1000)
        finally:
            await service.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    for name, samples in asyncio.run(measure(args.runs)).items():
        print(
            f"{name}: median {statistics.median(samples):.1f} ms, "
            f"min {min(samples):.1f}, max {max(samples):.1f} ({len(samples)} runs)"
        )


if __name__ == "__main__":
    main()
