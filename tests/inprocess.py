"""A real celld service started inside the test's own event loop (no HTTP, no mocks).

Real QuickJS isolates on JS threads, a real SQLite store in a temp folder; the test
drives instances through the same `wf.binding` operation the Worker's binding uses,
and can reach the real store (to inject faults into its write path).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson

from celld.cells.clock import Clock
from celld.cells.manager import CellSettings
from celld.project.config import find_config, load_config
from celld.server.service import Service, ServiceOptions

DURABLE = Path(__file__).resolve().parent / "projects" / "durable"


@asynccontextmanager
async def running_service(
    state: Path,
    project: Path = DURABLE,
    *,
    cells: CellSettings | None = None,
    js_threads: int = 2,
    step_limits: dict[str, int] | None = None,
    clock: Clock | None = None,
    store: str | None = None,
) -> AsyncIterator[Service]:
    config = load_config(find_config(project, None))
    options = ServiceOptions(persist_to=state, js_threads=js_threads, store=store)
    if clock is not None:
        options.clock = clock
    if cells is not None:
        options.cells = cells
    service = Service(config, options)
    if step_limits:
        service.step_limit_overrides = dict(step_limits)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def call(service: Service, workflow: str, method: str, **fields: Any) -> Any:
    assert service.cells is not None
    return await service.cells.ops["wf.binding"]({"workflow": workflow, "method": method, **fields})


def params(value: Any) -> str:
    """Params as the Worker's serializer sends them (plain JSON for plain data)."""
    return orjson.dumps(value).decode()


async def wait_for(
    service: Service, workflow: str, ids: list[str], statuses: set[str], timeout: float = 120
) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    seen: dict[str, dict[str, Any]] = {}
    while True:
        for instance_id in ids:
            if seen.get(instance_id, {}).get("status") not in statuses:
                try:
                    seen[instance_id] = await call(service, workflow, "status", id=instance_id)
                except Exception as error:  # noqa: BLE001 - store down: look again
                    seen[instance_id] = {"status": f"unreadable: {error}"}
        if all(s.get("status") in statuses for s in seen.values()) and len(seen) == len(ids):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"not all {statuses}: {seen}")
        await asyncio.sleep(0.05)


async def until(condition: Any, what: str, timeout: float = 20) -> None:
    """Poll `condition()` (cheap, in memory) until it holds; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.005)
