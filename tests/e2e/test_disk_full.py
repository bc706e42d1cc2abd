"""A full disk under a real `celld run` is a pause in progress, never a failed instance.

The state folder lives on a small tmpfs (where the machine lets the test mount one);
while instances run their steps, a file fills the disk for a few seconds, then goes.
Every instance must end complete with the exact result its code implies, and the
metrics must have said that the store was failing while it was.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celld_server import CelldServer
from tests.disks import CannotMount, fill, small_disk

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "durable"
STEPS = 1500
INSTANCES = 10


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    try:
        with small_disk(tmp_path / "disk", size_mb=48) as mounted:
            yield mounted
    except CannotMount as error:
        pytest.skip(f"cannot mount a tmpfs here: {error}")


def metrics(server: CelldServer) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in server.get("/cdn-cgi/celld/metrics").text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split()
            out[name] = float(value)
    return out


def metric(server: CelldServer, name: str) -> float:
    return metrics(server)[name]


def store_failing(server: CelldServer) -> bool:
    """One scrape that says the store is failing, and since when."""
    scrape = metrics(server)
    return scrape["celld_store_healthy"] == 0 and scrape["celld_store_failing_since_seconds"] > 0


def test_instances_outlive_a_full_disk(disk: Path, tmp_path: Path) -> None:
    server = CelldServer(PROJECT, disk / "state")
    server.log_path = tmp_path / "celld.log"
    server.start()
    try:
        ids = [f"disk-{n}" for n in range(INSTANCES)]
        for instance_id in ids:
            response = server.post(
                "/create", params={"wf": "LONG", "id": instance_id}, json={"steps": STEPS}
            )
            assert response.status_code == 200, response.text
        server.wait_for(lambda: len(server.describe("long-workflow", ids[-1])["steps"]) > 50)
        filler = fill(disk)
        try:
            server.wait_for(lambda: store_failing(server), timeout=30)
            time.sleep(4)
            # While the disk is full, a create is refused with a retryable error...
            refused = server.post("/create", params={"wf": "LONG", "id": "during"}, json={})
            assert refused.status_code == 500
            assert "store.unavailable" in refused.json()["error"]["message"]
        finally:
            os.unlink(filler)
        # ... and changed nothing.
        assert server.get("/status", params={"wf": "LONG", "id": "during"}).status_code == 500

        def all_final() -> dict[str, object] | None:
            out = server.post("/statuses", params={"wf": "LONG"}, json=ids).json()
            final_statuses = ("complete", "errored", "terminated")
            done = all(s.get("status") in final_statuses for s in out.values())
            return out if done else None

        final = server.wait_for(all_final, timeout=180, interval=0.5)
        total = STEPS * (STEPS + 1) // 2
        for instance_id in ids:
            assert final[instance_id] == {
                "status": "complete",
                "output": {"total": total, "steps": STEPS},
            }, instance_id
            steps = server.describe("long-workflow", instance_id)["steps"]
            assert len(steps) == STEPS and {s["state"] for s in steps} == {"done"}
        assert metric(server, "celld_store_healthy") == 1
        assert metric(server, "celld_store_outages_total") >= 1
        assert "the store is failing" in server.log()
    finally:
        server.stop()
    json.dumps(final)  # the statuses were plain JSON
