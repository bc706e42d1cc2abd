"""Drive the objects test project in process: a real service, real isolates, real files."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

from celld.server.service import Service

OBJECTS = Path(__file__).resolve().parent.parent / "projects" / "objects"


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
