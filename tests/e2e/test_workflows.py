"""Workflows end to end: a real `celld run` with a manual clock, driven over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

DAY = 86_400_000
HOUR = 3_600_000
DURABLE = PROJECTS / "durable"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(DURABLE, tmp_path_factory.mktemp("wf") / "state", manual_clock=True)
    celld.start()
    yield celld
    celld.stop()


def create(
    server: CelldServer, instance_id: str, ops: list[dict[str, Any]], wf: str = "SCRIPT"
) -> None:
    response = server.post("/create", params={"id": instance_id, "wf": wf}, json={"ops": ops})
    assert response.status_code == 200, response.text


def status(server: CelldServer, instance_id: str, wf: str = "SCRIPT") -> dict[str, Any]:
    return server.get("/status", params={"id": instance_id, "wf": wf}).json()


def wait_status(
    server: CelldServer, instance_id: str, wanted: str, wf: str = "SCRIPT"
) -> dict[str, Any]:
    return server.wait_for(lambda: (s := status(server, instance_id, wf))["status"] == wanted and s)


def test_steps_complete_with_output(server: CelldServer) -> None:
    create(server, "basic", [{"do": "a", "value": 1}, {"do": "b", "value": {"x": [2]}}])
    assert wait_status(server, "basic", "complete")["output"] == {"results": [1, {"x": [2]}]}


def test_day_long_sleep_waits_for_the_clock(server: CelldServer) -> None:
    create(
        server,
        "sleeper",
        [{"do": "a", "value": 1}, {"sleep": "nap", "duration": "1 day"}, {"do": "b", "value": 2}],
    )
    wait_status(server, "sleeper", "waiting")
    server.advance(DAY - 60_000)
    # Paged in ahead of its deadline, it replays to its sleep and reads `waiting`
    # throughout (as on Cloudflare): sampled while the replay runs, never `running`.
    seen = {status(server, "sleeper")["status"] for _ in range(40)}
    assert seen == {"waiting"}, seen
    assert server.step("script-workflow", "sleeper", "b") == {}  # not reached before the deadline
    server.advance(60_000)
    assert wait_status(server, "sleeper", "complete")["output"]["results"] == [
        1,
        {"slept": "nap"},
        2,
    ]


def test_wait_for_event_default_timeout_is_24_hours(server: CelldServer) -> None:
    create(server, "patient", [{"wait": "approval", "type": "approve", "catch": True}])
    wait_status(server, "patient", "waiting")
    server.advance(23 * HOUR)
    assert status(server, "patient")["status"] == "waiting"
    server.advance(HOUR)
    out = wait_status(server, "patient", "complete")["output"]["results"][0]
    assert out["caught"]["message"] == "WorkflowTimeoutError: Execution timed out after 86400000ms"


def test_events_buffered_before_the_wait_are_consumed_oldest_first(server: CelldServer) -> None:
    create(
        server,
        "buffered",
        [
            {"sleep": "first", "duration": "1 hour"},
            {"wait": "w1", "type": "go"},
            {"wait": "w2", "type": "go"},
        ],
    )
    wait_status(server, "buffered", "waiting")
    for n in (1, 2):
        assert (
            server.post(
                "/event", params={"id": "buffered", "type": "go"}, json={"n": n}
            ).status_code
            == 200
        )
    server.advance(HOUR)
    results = wait_status(server, "buffered", "complete")["output"]["results"]
    assert [r["payload"] for r in results[1:]] == [{"n": 1}, {"n": 2}]
    assert all(r["type"] == "go" and r["timestampIsDate"] for r in results[1:])


def test_retry_delay_is_waited_on_the_engine_clock(server: CelldServer) -> None:
    config = {"retries": {"limit": 3, "delay": "10 seconds", "backoff": "exponential"}}
    create(server, "retrier", [{"do": "flaky", "fail": 2, "config": config}])

    def attempts() -> int:
        return int(server.step("script-workflow", "retrier", "flaky").get("failed_attempts", 0))

    server.wait_for(lambda: attempts() == 1)  # first attempt failed; retry due in 10 s
    # (the status settles in the commit after the failed attempt's row)
    server.wait_for(lambda: status(server, "retrier")["status"] == "waiting")
    server.advance(9_000)
    assert attempts() == 1
    server.advance(1_000)
    server.wait_for(lambda: attempts() == 2)  # second attempt failed; next retry in 20 s
    server.advance(19_000)
    server.wait_for(lambda: status(server, "retrier")["status"] == "waiting")
    assert attempts() == 2
    server.advance(1_000)
    out = wait_status(server, "retrier", "complete")["output"]["results"][0]
    assert out == {"step": "flaky", "attempt": 3}


def test_pause_moves_deadlines_by_the_time_paused(server: CelldServer) -> None:
    create(
        server,
        "pausable",
        [{"sleep": "nap", "duration": "1 hour"}, {"do": "after", "value": "done"}],
    )
    wait_status(server, "pausable", "waiting")
    server.advance(30 * 60_000)
    server.post("/pause", params={"id": "pausable"})
    assert wait_status(server, "pausable", "paused")
    server.advance(2 * HOUR)  # the sleep's end passes while paused
    assert status(server, "pausable")["status"] == "paused"
    server.post("/resume", params={"id": "pausable"})
    wait_status(server, "pausable", "waiting")
    server.advance(29 * 60_000)
    assert status(server, "pausable")["status"] == "waiting"
    server.advance(60_000)
    assert wait_status(server, "pausable", "complete")["output"]["results"][1] == "done"


def test_events_sent_while_paused_are_kept(server: CelldServer) -> None:
    create(server, "paused-events", [{"wait": "w", "type": "go"}])
    wait_status(server, "paused-events", "waiting")
    server.post("/pause", params={"id": "paused-events"})
    wait_status(server, "paused-events", "paused")
    server.post("/event", params={"id": "paused-events", "type": "go"}, json="kept")
    assert status(server, "paused-events")["status"] == "paused"
    server.post("/resume", params={"id": "paused-events"})
    assert (
        wait_status(server, "paused-events", "complete")["output"]["results"][0]["payload"]
        == "kept"
    )


def test_terminate_and_terminating_a_finished_instance(server: CelldServer) -> None:
    create(server, "doomed", [{"sleep": "nap", "duration": "1 day"}])
    wait_status(server, "doomed", "waiting")
    assert server.post("/terminate", params={"id": "doomed"}).status_code == 200
    assert status(server, "doomed") == {"status": "terminated"}
    again = server.post("/terminate", params={"id": "doomed"})
    assert again.status_code == 500
    assert "instance.cannot_terminate" in again.json()["error"]["message"]


def test_restart_from_a_step_keeps_earlier_results(server: CelldServer) -> None:
    ops = [{"do": "a", "returns": "uuid-ish", "value": None}, {"do": "b", "ctx": True}]
    create(server, "again", [{"do": "keep", "ctx": True}, {"do": "redo", "ctx": True}])
    first = wait_status(server, "again", "complete")["output"]["results"]
    response = server.post("/restart", params={"id": "again"}, json={"from": {"name": "redo"}})
    assert response.status_code == 200, response.text
    second = wait_status(server, "again", "complete")["output"]["results"]
    assert second[0] == first[0]
    assert second[1]["ctx"]["step"] == {"name": "redo", "count": 1}
    del ops


def test_duplicate_and_invalid_ids(server: CelldServer) -> None:
    create(server, "unique", [{"do": "a", "value": 1}])
    duplicate = server.post("/create", params={"id": "unique"}, json={"ops": []})
    assert duplicate.status_code == 500
    assert "instance.already_exists" in duplicate.json()["error"]["message"]
    invalid = server.post("/create", params={"id": "bad id!"}, json={"ops": []})
    assert "instance.invalid_id" in invalid.json()["error"]["message"]
    missing = server.get("/status", params={"id": "never-created"})
    assert "instance.not_found" in missing.json()["error"]["message"]


def test_create_batch_forms(server: CelldServer) -> None:
    create(server, "batch-old", [{"do": "a", "value": 1}])
    ids = server.post(
        "/create-batch", json=[{"id": "batch-old"}, {"id": "batch-1"}, {"id": "batch-1"}]
    ).json()
    assert ids == {"ids": ["batch-1"]}
    report = server.post(
        "/create-batch",
        json={"instances": [{"id": "batch-old"}, {"id": "batch-2"}, {"id": "batch-2"}]},
    ).json()
    assert report["created"] == ["batch-2"]
    assert [(e["index"], e["code"]) for e in report["errors"]] == [(0, 10405), (2, 10415)]
    empty = server.post("/create-batch", json=[])
    assert "at least 1 instance" in empty.json()["error"]["message"]
    too_many = server.post("/create-batch", json=[{} for _ in range(101)])
    assert "100 instances" in too_many.json()["error"]["message"]


def test_structured_clone_types_survive_replay(server: CelldServer) -> None:
    kinds = ["date", "map", "set", "bigint", "u8", "undefined", "nested"]
    ops = [{"do": k, "returns": k} for k in kinds]
    ops.insert(3, {"sleep": "replay here", "duration": "1 hour"})
    create(server, "typed", ops)
    wait_status(server, "typed", "waiting")
    server.advance(HOUR)
    results = wait_status(server, "typed", "complete")["output"]["results"]
    described = dict(zip(kinds, results[:3] + results[4:], strict=True))
    assert described["date"] == {"type": "Date", "value": "2026-01-02T03:04:05.000Z"}
    assert described["map"]["type"] == "Map"
    assert described["set"]["type"] == "Set"
    assert described["bigint"] == {"type": "bigint", "value": "12345678901234567890"}
    assert described["u8"] == {"type": "Uint8Array", "value": [1, 2, 255]}
    assert described["undefined"] == {"type": "undefined"}


def test_unserialisable_result_fails_the_instance(server: CelldServer) -> None:
    create(server, "unclonable", [{"do": "fn", "returns": "function"}])
    error = wait_status(server, "unclonable", "errored")["error"]
    assert "not serialisable" in error["message"]


def test_step_limit(server: CelldServer) -> None:
    create(server, "limited", [{"do": f"s{i}", "value": i} for i in range(4)], wf="LIMITED")
    error = wait_status(server, "limited", "errored", wf="LIMITED")["error"]
    assert "The limit of 3 steps has been reached" in error["message"]


def test_run_pending_without_steps_fails_after_60_seconds(server: CelldServer) -> None:
    server.post("/create", params={"id": "stuck", "wf": "STUCK"})
    deadline = server.wait_for(lambda: server.describe("stuck-workflow", "stuck")["stall_deadline"])
    assert status(server, "stuck", "STUCK")["status"] == "running"
    server.advance(deadline - server.clock_now() - 1_000)
    assert status(server, "stuck", "STUCK")["status"] == "running"
    server.advance(1_000)
    error = wait_status(server, "stuck", "errored", wf="STUCK")["error"]
    assert "60 s" in error["message"]


def test_retention_frees_the_id(server: CelldServer) -> None:
    retention = json.dumps({"successRetention": "1 day"})
    response = server.post(
        "/create", params={"id": "short-lived", "retention": retention}, json={"ops": []}
    )
    assert response.status_code == 200
    wait_status(server, "short-lived", "complete")
    server.advance(DAY + 120_000)  # past retention and the next sweep

    def swept() -> bool:
        # The sweep leaves instances still in memory alone (the finished run may not have
        # let go of its cell yet): each look moves the clock past one more sweep.
        server.advance(60_000)
        return "error" in status(server, "short-lived")

    server.wait_for(swept, interval=0.2)
    create(server, "short-lived", [{"do": "again", "value": 2}])
    assert wait_status(server, "short-lived", "complete")["output"] == {"results": [2]}


def test_metrics_report_cells_alarms_and_store(server: CelldServer) -> None:
    create(server, "metered", [{"sleep": "nap", "duration": "30 minutes"}])
    wait_status(server, "metered", "waiting")
    text = server.get("/cdn-cgi/celld/metrics").text
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert samples["celld_cells_resident"] >= 1  # inside the residency window: kept resident
    assert samples["celld_alarms_pending"] >= 1
    assert samples['celld_instances{status="waiting"}'] >= 1
    assert samples["celld_store_commits_total"] > 0
    assert samples["celld_isolate_memory_bytes"] > 0
    assert 'celld_alarm_wake_lag_ms{quantile="0.99"}' in samples
    # start-up's heap was frozen once serving (celld/server/collector.py), passes are timed
    assert samples["celld_gc_frozen_objects"] > 10_000
    assert 'celld_gc_longest_pause_seconds{generation="2"}' in samples
    assert 'celld_gc_passes_total{generation="0"}' in samples
