"""Runaway workflows fail the attempt or the instance that ran away, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(
        PROJECTS / "durable", tmp_path_factory.mktemp("limits") / "s", manual_clock=True
    )
    celld.start()
    yield celld
    celld.stop()


def runaway(server: CelldServer, where: str) -> None:
    response = server.post("/create", params={"id": where, "wf": "RUNAWAY"}, json={"where": where})
    assert response.status_code == 200, response.text


def final(server: CelldServer, instance_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        s = server.get("/status", params={"id": instance_id, "wf": "RUNAWAY"}).json()
        return s if s["status"] in ("complete", "errored") else None

    return server.wait_for(done, timeout=60)


@pytest.mark.parametrize(
    ("where", "first_error"),
    [("step", "CPU time limit exceeded"), ("memory", "out of memory")],
)
def test_runaway_attempt_fails_then_retries(
    server: CelldServer, where: str, first_error: str
) -> None:
    server.post(
        "/create",
        params={"id": f"bystander-{where}"},
        json={"ops": [{"sleep": "s", "duration": 1000}, {"do": "x", "value": 1}]},
    )
    runaway(server, where)
    row = server.wait_for(
        lambda: (
            server.step("runaway-workflow", where, "spin").get("failed_attempts") == 1
            and server.step("runaway-workflow", where, "spin")
        ),
        timeout=60,
    )
    assert first_error in row["error"]["message"]
    server.advance(1_000)
    assert final(server, where) == {
        "status": "complete",
        "output": {"spin": "survived on attempt 2"},
    }
    bystander = server.wait_for(
        lambda: (
            (s := server.get("/status", params={"id": f"bystander-{where}"}).json())["status"]
            == "complete"
            and s
        )
    )
    assert bystander["output"] == {"results": [{"slept": "s"}, 1]}


def test_runaway_run_fails_the_instance(server: CelldServer) -> None:
    runaway(server, "run")
    status = final(server, "run")
    assert status["status"] == "errored"
    assert "CPU time limit exceeded" in status["error"]["message"]


def test_deep_recursion_is_an_ordinary_error(server: CelldServer) -> None:
    runaway(server, "recursion")
    row = server.wait_for(
        lambda: (
            server.step("runaway-workflow", "recursion", "spin").get("failed_attempts") == 1
            and server.step("runaway-workflow", "recursion", "spin")
        )
    )
    server.advance(1_000)
    status = final(server, "recursion")
    assert status["status"] == "errored"
    assert status["error"] == {"name": "RangeError", "message": "Maximum call stack size exceeded"}
    assert row["error"]["name"] == "RangeError"
