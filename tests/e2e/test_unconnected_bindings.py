"""Bindings to a Worker that is not running (tests/projects/unconnected): a Durable Object
binding and a workflow with `script_name = "other-worker"`. As wrangler dev 4.164.0 does,
`celld run` starts with a warning naming them; ids are made as that Worker's namespace
makes them; a call through a stub rejects, a fetch answers 503, and a workflow instance is
created and then errors, each with wrangler's words; this Worker's own object still works."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "unconnected"
NOT_FOUND = 'Worker "other-worker" not found. Make sure it is running locally.'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("unconnected") / "state")
    celld.start(timeout=60)
    yield celld
    celld.stop()


def test_starts_with_a_warning_naming_the_bindings(server: CelldServer) -> None:
    warning = next(line for line in server.log().splitlines() if "not connected" in line)
    assert "env.REMOTE (Durable Object Counter of Worker 'other-worker')" in warning
    assert "env.FLOW (Workflow Flow of Worker 'other-worker')" in warning
    assert "env.LOCAL" not in warning


def test_object_calls_fail_with_wranglers_error(server: CelldServer) -> None:
    assert server.get("/do").json() == {"name": "Error", "message": NOT_FOUND}
    assert server.get("/do-fetch").json() == {"ok": [503, NOT_FOUND]}
    # the id wrangler dev gives idFromName("x") in other-worker's Counter namespace
    expected = "98e813d3811855fa6ffc3b23c83e6565ca0c0daacdb4f0482886e1f6b7f90d73"
    assert server.get("/do-id").json() == {"ok": expected}


def test_own_objects_still_work(server: CelldServer) -> None:
    assert server.get("/local").json() == {"ok": "pong"}


def test_workflow_instance_is_created_and_errors(server: CelldServer) -> None:
    assert server.get("/wf").json() == {"ok": "a"}
    status = server.wait_for(
        lambda: (s := server.get("/wf-status").json()["ok"])["status"] == "errored" and s,
        timeout=60,
    )
    assert status["error"] == {"name": "Error", "message": NOT_FOUND}
