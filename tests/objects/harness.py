"""Drive the objects test project in process: a real service, real isolates, real files."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from celld.cells.clock import ManualClock
from celld.project.config import find_config, load_config
from celld.server.service import Service, ServiceOptions

OBJECTS = Path(__file__).resolve().parent.parent.parent / "compat" / "projects" / "objects"
START_MS = 1_800_000_000_000


@asynccontextmanager
async def objects_service(
    state: Path, clock: ManualClock | None = None, project: Path = OBJECTS
) -> AsyncIterator[Service]:
    """The objects project on a manual clock (alarms and idle eviction move with it)."""
    config = load_config(find_config(project, None))
    options = ServiceOptions(persist_to=state, js_threads=2, clock=clock or ManualClock(START_MS))
    service = Service(config, options)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def get(service: Service, path: str, **query: str) -> tuple[int, dict[str, str], str]:
    assert service.pool is not None
    url = "http://localhost" + path
    if query:
        url += "?" + urllib.parse.urlencode(query)
    response = await service.pool.handle("GET", url, [], b"")
    return response.status, dict(response.headers), response.body.decode()


async def rpc(service: Service, name: str, method: str, *args: Any) -> Any:
    status, _, body = await get(service, "/rpc", name=name, call=json.dumps([method, *args]))
    assert status == 200, body
    return json.loads(body)
