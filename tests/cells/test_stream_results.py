"""A step may return a ReadableStream of bytes: its bytes are recorded and every read of
the step, replays included, gets a new stream of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from celld.cells.manager import CellSettings
from tests.inprocess import call, params, running_service, wait_for


@pytest.mark.parametrize("replay_every_step", [False, True])
async def test_stream_results_are_recorded_and_replayed(
    tmp_path: Path, replay_every_step: bool
) -> None:
    settings = CellSettings(replay_every_step=replay_every_step)
    async with running_service(tmp_path / "state", cells=settings) as service:
        assert service.cells is not None
        await call(service, "stream-workflow", "create", id="s")
        final = await wait_for(service, "stream-workflow", ["s"], {"complete", "errored"})
        assert final["s"] == {
            "status": "complete",
            "output": params({"isStream": True, "text": "hello stream", "again": "hello stream!"}),
        }
        described = await service.cells.describe("stream-workflow", "s")
        assert described is not None
        assert "__celld_readable_stream__" in described["steps"][0]["value"]
