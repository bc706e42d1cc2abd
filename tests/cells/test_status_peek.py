"""`status()` of an instance that is not in memory reads its committed row: the instance
is not loaded (nor claimed) for it, and the answer is the one a loaded cell gives."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from celld.isolate.host import HostError
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, wait_for


async def test_status_of_an_unloaded_instance_loads_nothing(tmp_path: Path) -> None:
    ops = [{"do": "a", "value": 1}, {"do": "b", "value": 2}]
    async with running_service(tmp_path / "state") as service:
        assert service.cells is not None and service.store is not None
        await call(service, "script-workflow", "create", id="p", params=params({"ops": ops}))
        seen = await wait_for(service, "script-workflow", ["p"], {"complete"})
        ref = InstanceRef("script-workflow", "p")
        for _ in range(400):
            if service.cells.loaded(ref) is None:
                break
            await asyncio.sleep(0.01)
        assert service.cells.loaded(ref) is None
        claims = service.store.claims  # type: ignore[attr-defined]
        status = await call(service, "script-workflow", "status", id="p")
        assert status == seen["p"]
        assert service.store.claims == claims  # type: ignore[attr-defined]
        assert service.cells.loaded(ref) is None
        with pytest.raises(HostError, match="not_found"):
            await call(service, "script-workflow", "status", id="nobody")
