"""Durable Objects end to end in process: ids, stubs, RPC, fetch, storage, SQL, eviction."""

from __future__ import annotations

import json
from pathlib import Path

from tests.inprocess import running_service
from tests.objects.harness import OBJECTS, get, rpc


async def test_rpc_calls_keep_state_per_name(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state", OBJECTS) as service:
        assert await rpc(service, "a", "increment") == {"value": 1}
        assert await rpc(service, "a", "increment", 5) == {"value": 6}
        assert await rpc(service, "b", "increment") == {"value": 1}
        who = (await rpc(service, "a", "whoami"))["value"]
        assert who["name"] == "a" and len(who["id"]) == 64 and who["loads"] == 0
