"""A `sensitive: "output"` step's value is never shown by celld's describe view, yet
replay returns it."""

from __future__ import annotations

from pathlib import Path

from celld.cells.manager import CellSettings
from tests.inprocess import call, params, running_service, wait_for


async def test_sensitive_output_is_hidden_but_replayed(tmp_path: Path) -> None:
    script = [
        {"do": "secret", "value": "s3cr3t", "config": {"sensitive": "output"}},
        {"do": "plain", "value": "open"},
    ]
    # Replay at every step: the second step only sees the secret through the journal.
    settings = CellSettings(replay_every_step=True)
    async with running_service(tmp_path / "state", cells=settings) as service:
        assert service.cells is not None
        await call(service, "script-workflow", "create", id="s", params=params({"ops": script}))
        final = await wait_for(service, "script-workflow", ["s"], {"complete", "errored"})
        assert final["s"]["status"] == "complete"
        assert "s3cr3t" in final["s"]["output"]  # run() got the value back on replay
        described = await service.cells.describe("script-workflow", "s")
        assert described is not None
        values = {row["name"]: row["value"] for row in described["steps"]}
        assert values == {"secret": '"[REDACTED]"', "plain": '"open"'}
        assert "s3cr3t" not in str(described["steps"])
