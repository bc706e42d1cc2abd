"""SIGKILL `celld run` mid-workflow and start it again on the same state folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS
from tests.e2e.counter import counter_server

DAY = 86_400_000


def order(server: CelldServer, instance_id: str, params: dict[str, Any]) -> None:
    response = server.post("/order", params={"id": instance_id}, json=params)
    assert response.status_code == 200, response.text


def status(server: CelldServer, instance_id: str) -> dict[str, Any]:
    return server.get("/status", params={"id": instance_id, "wf": "ORDER"}).json()


def wait_status(server: CelldServer, instance_id: str, wanted: str) -> dict[str, Any]:
    return server.wait_for(lambda: (s := status(server, instance_id))["status"] == wanted and s)


def test_sigkill_during_step_sleep_and_event_wait_loses_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with counter_server() as counter:
        server = CelldServer(PROJECTS / "durable", state, manual_clock=True).start()
        try:
            # waiting-for-event: past its sleep, blocked in waitForEvent
            order(server, "waiter", {"upstream": counter.url})
            wait_status(server, "waiter", "waiting")
            server.advance(DAY)
            server.wait_for(lambda: status(server, "waiter")["status"] == "waiting")
            # sleeping, with its event already sent (buffered, acknowledged)
            order(server, "sleeper", {"upstream": counter.url})
            wait_status(server, "sleeper", "waiting")
            ack = server.post(
                "/event",
                params={"id": "sleeper", "type": "paid", "wf": "ORDER"},
                json={"by": "early"},
            )
            assert ack.status_code == 200
            # in the middle of a step callback
            order(server, "busy", {"upstream": counter.url, "hold": 3_000})
            server.wait_for(lambda: len(counter.values("reserve")) == 3)
            offset = server.clock_now()
        finally:
            server.kill()

        # Start again at the engine time the crash left off.
        server = CelldServer(PROJECTS / "durable", state, manual_clock=offset).start()
        try:
            # The interrupted callback runs again (it holds 3 s of wall time), then sleeps.
            wait_status(server, "busy", "waiting")
            assert len(counter.values("reserve")) == 4
            server.advance(DAY)  # sleeps end; the sleeper's buffered event is taken at once
            server.wait_for(lambda: len(counter.values("ship")) == 1)
            for instance in ("waiter", "busy"):
                server.post(
                    "/event",
                    params={"id": instance, "type": "paid", "wf": "ORDER"},
                    json={"by": "late"},
                )
            server.wait_for(lambda: len(counter.values("ship")) == 3)  # every first attempt failed
            # The clock moves only once every failure is recorded (each retry's deadline is
            # set from the time its failure is reported, which follows the counter's hit).
            for instance in ("waiter", "sleeper", "busy"):
                server.wait_for(
                    lambda i=instance: (
                        server.step("order-workflow", i, "ship").get("state") == "retrying"
                    )
                )
            server.advance(60_000)  # the ship step's retry delay
            waiter = wait_status(server, "waiter", "complete")["output"]
            sleeper = wait_status(server, "sleeper", "complete")["output"]
            busy = wait_status(server, "busy", "complete")["output"]
        finally:
            server.kill()

    reserve_values = counter.values("reserve")
    # Each finished step result is the one first recorded.
    assert waiter["token"] == reserve_values[0]
    assert sleeper["token"] == reserve_values[1]
    assert waiter["reservedAtIsDate"] and sleeper["reservedAtIsDate"]
    assert waiter["payment"] == {"by": "late"}
    assert sleeper["payment"] == {"by": "early"}
    assert waiter["shipped"].endswith("on attempt 2")
    # The interrupted callback ran once more for one crash; its second result is the one kept.
    assert len(reserve_values) == 3 + 1
    assert busy["token"] == reserve_values[3]
    assert busy["payment"] == {"by": "late"}
    # Every ship callback ran exactly the attempts the code implies (one failure, one success).
    assert sorted(counter.values("ship")) == sorted(["attempt-1", "attempt-2"] * 3)
