"""A full disk under a real `celld run` is a pause in progress, never a failed instance.

The state folder is a disk the test fills and frees at will (tests/disks.py: writes that
need space fail with ENOSPC, as on a full disk); while instances run their steps, the
disk is full until the store has refused several commits, then space comes back. Every
instance must end complete with the exact result its code implies, and the metrics
must have said that the store was failing while it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celld_server import CelldServer
from tests.disks import FullableDisk

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "durable"
STEPS = 1500
INSTANCES = 10


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[FullableDisk]:
    """(No skip: a machine that cannot build the shim fails these tests, saying why.)"""
    disk = FullableDisk(tmp_path / "disk", tmp_path / "shim")
    try:
        yield disk
    finally:
        disk.free()


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


@pytest.mark.parametrize("copy_on_write", [True, False], ids=["copy-on-write", "in-place"])
def test_instances_outlive_a_full_disk(
    disk: FullableDisk, tmp_path: Path, copy_on_write: bool
) -> None:
    """A full copy-on-write disk refuses every commit until space is back; one that
    overwrites in place refuses the commits that need new space and lets through those
    that fit in the room the store's files already have, so there the store fails and
    recovers by turns. Either way nothing acknowledged is lost and nothing fails."""
    server = CelldServer(PROJECT, disk.folder / "state", env=disk.env)
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
        assert metric(server, "celld_store_failed_commits_total") == 0
        with disk.full(copy_on_write=copy_on_write):
            # the store refuses commits, and goes on refusing them while the disk is full
            server.wait_for(
                lambda: metric(server, "celld_store_failed_commits_total") >= 4,
                timeout=60,
                interval=0.1,
            )
            during = server.post("/create", params={"wf": "LONG", "id": "during"}, json={})
            if copy_on_write:
                # every commit fails: the create is refused with a retryable error...
                assert store_failing(server)
                assert during.status_code == 500, during.text
            if during.status_code == 500:
                assert "store.unavailable" in during.json()["error"]["message"]
            else:  # (in place: it fit in the room the WAL had)
                assert during.status_code == 200, during.text
        during_status = server.get("/status", params={"wf": "LONG", "id": "during"})
        if during.status_code == 500:
            # ... and changed nothing
            assert during_status.status_code == 500
            assert "instance.not_found" in during_status.text
        else:  # an acknowledged create is durable
            assert during_status.status_code == 200, during_status.text

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
        log = server.log()
        assert "the store is failing" in log
        assert "database or disk is full" in log  # what SQLite says on a full disk
    finally:
        server.stop()
    json.dumps(final)  # the statuses were plain JSON
