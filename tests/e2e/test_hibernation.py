"""Cells hibernate outside the residency window and under the resident cap, and wake on time."""

from __future__ import annotations

from pathlib import Path

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

HOUR = 3_600_000
DAY = 24 * HOUR


def metrics(server: CelldServer) -> dict[str, float]:
    text = server.get("/cdn-cgi/celld/metrics").text
    return {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def batch_of_sleepers(server: CelldServer, prefix: str, count: int, duration: str) -> list[str]:
    ids = [f"{prefix}-{i}" for i in range(count)]
    for start in range(0, count, 100):
        chunk = [
            {
                "id": i,
                "params": {
                    "ops": [{"sleep": "nap", "duration": duration}, {"do": "after", "value": i}]
                },
            }
            for i in ids[start : start + 100]
        ]
        assert server.post("/create-batch", json=chunk).status_code == 200
    return ids


def all_status(server: CelldServer, ids: list[str]) -> dict[str, str]:
    found = server.post("/statuses", json=ids).json()
    return {i: found[i].get("status", "missing") for i in ids}


def test_far_deadlines_hibernate_and_a_restart_loads_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = CelldServer(PROJECTS / "durable", state, manual_clock=True).start()
    try:
        ids = batch_of_sleepers(server, "far", 300, "1 day")
        server.wait_for(lambda: set(all_status(server, ids).values()) == {"waiting"}, timeout=120)
        server.wait_for(lambda: metrics(server)["celld_cells_resident"] == 0)
        near = batch_of_sleepers(server, "near", 3, "10 minutes")
        server.wait_for(lambda: set(all_status(server, near).values()) == {"waiting"})
        assert server.describe("script-workflow", "near-0")["resident"] is True
        assert server.describe("script-workflow", "far-0")["resident"] is False
        now = server.clock_now()
    finally:
        server.stop()

    server = CelldServer(PROJECTS / "durable", state, manual_clock=now).start()
    try:
        started = metrics(server)
        assert started["celld_cells_loaded"] <= 3  # only the near ones come back
        assert started["celld_alarms_pending"] == 3
        assert started['celld_instances{status="waiting"}'] == 303
        server.advance(10 * 60_000)
        server.wait_for(lambda: set(all_status(server, near).values()) == {"complete"})
        assert set(all_status(server, ids).values()) == {"waiting"}
        server.advance(DAY)
        server.wait_for(lambda: set(all_status(server, ids).values()) == {"complete"}, timeout=120)
        lag = metrics(server)['celld_alarm_wake_lag_ms{quantile="0.99"}']
        assert lag >= 0
    finally:
        server.stop()


def test_resident_cap_hibernates_least_recently_used(tmp_path: Path) -> None:
    server = CelldServer(
        PROJECTS / "durable", tmp_path / "state", manual_clock=True, env={"CELLD_MAX_RESIDENT": "4"}
    ).start()
    try:
        ids = batch_of_sleepers(server, "capped", 20, "10 minutes")
        server.wait_for(lambda: set(all_status(server, ids).values()) == {"waiting"}, timeout=60)
        assert metrics(server)["celld_cells_resident"] <= 4
        server.advance(10 * 60_000)
        server.wait_for(lambda: set(all_status(server, ids).values()) == {"complete"}, timeout=60)
        outputs = server.post("/statuses", json=ids).json()
        assert [outputs[i]["output"]["results"][1] for i in ids] == ids
    finally:
        server.stop()


def test_waking_instances_go_before_new_ones(tmp_path: Path) -> None:
    from tests.e2e.counter import counter_server

    with counter_server() as counter:
        server = CelldServer(
            PROJECTS / "durable",
            tmp_path / "state",
            manual_clock=True,
            env={"CELLD_MAX_RESIDENT": "1"},
        ).start()
        try:

            def create(instance_id: str, **params: object) -> None:
                response = server.post(
                    "/create",
                    params={"id": instance_id, "wf": "ORDERED"},
                    json={"upstream": counter.url, **params},
                )
                assert response.status_code == 200, response.text

            create("sleeper", sleep="1 minute")
            server.wait_for(lambda: server.step("ordered-workflow", "sleeper", "nap"))
            create("holder", hold=1500)  # takes the only slot for 1.5 s of wall time
            server.wait_for(lambda: ("work", "holder") in counter.hits)
            server.advance(60_000)  # the sleeper is due while the slot is taken
            server.wait_for(lambda: metrics(server)["celld_cells_run_queue"] == 1)
            create("newcomer")
            server.wait_for(lambda: metrics(server)["celld_cells_run_queue"] == 2)
            server.wait_for(lambda: len(counter.hits) == 4, timeout=30)
        finally:
            server.stop()
    assert counter.hits == [
        ("work", "sleeper"),
        ("work", "holder"),
        ("after nap", "sleeper"),
        ("work", "newcomer"),
    ]
