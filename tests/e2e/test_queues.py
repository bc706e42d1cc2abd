"""Queues in a real `celld run` (tests/projects/queues) on the manual clock: sends from
fetch(), the queue() handler records each delivery in KV, and the tests read it over HTTP.

Batch timeouts, retry delays and delivery delays are crossed by moving the manual clock, so
nothing waits for real time; every wait is on a delivery showing up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

PROJECT = PROJECTS / "queues"
T0 = 1_900_000_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("queues") / "state", manual_clock=T0)
    celld.start()
    yield celld
    celld.stop()


def tag() -> str:
    return uuid.uuid4().hex[:12]


def send(server: CelldServer, **params: Any) -> dict[str, Any]:
    response = server.post("/send", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def seen(server: CelldServer, name: str) -> list[dict[str, Any]]:
    return list(server.get("/seen", params={"tag": name}).json())


def wait_seen(server: CelldServer, name: str, count: int) -> list[dict[str, Any]]:
    return server.wait_for(lambda: (s := seen(server, name)) and len(s) >= count and s)  # type: ignore[no-any-return]


def test_a_sent_message_reaches_the_consumer_with_cloudflares_fields(server: CelldServer) -> None:
    name = tag()
    answer = send(server, tag=name)
    metrics = answer["value"]["metadata"]["metrics"]
    assert metrics["backlogCount"] >= 1 and metrics["backlogBytes"] > 0
    [delivery] = wait_seen(server, name, 1)
    assert delivery["queue"] == "jobs"
    assert delivery["keys"] == ["attempts", "body", "timestamp", "id"]  # as workerd orders them
    assert delivery["attempts"] == 1
    assert len(delivery["id"]) == 32 and int(delivery["id"], 16) >= 0
    assert delivery["timestamp"] == server.clock_now()  # the clock has not moved
    assert delivery["body"] == {"tag": name, "mode": "ok"}


def test_text_and_structured_bodies_arrive_as_sent(server: CelldServer) -> None:
    name = tag()
    send(server, tag=name, type="text")
    [delivery] = wait_seen(server, name, 1)
    assert delivery["body"] == name


def test_json_is_the_default_body_type_by_date_and_v8_keeps_dates_and_maps(
    server: CelldServer,
) -> None:
    default, v8 = tag(), tag()
    assert server.post("/typed", params={"tag": default}).status_code == 200
    assert server.post("/typed", params={"tag": v8, "type": "v8"}).status_code == 200
    assert wait_seen(server, default, 1)[0]["types"] == {"d": "String", "m": "Object"}
    assert wait_seen(server, v8, 1)[0]["types"] == {"d": "Date", "m": "Map"}
    assert server.post("/bytes").status_code == 200
    assert wait_seen(server, "bytes", 1)[0]["body"]["length"] == 3  # an ArrayBuffer


def test_retry_then_success(server: CelldServer) -> None:
    name = tag()
    send(server, tag=name, mode="retry-once")
    first, second = wait_seen(server, name, 2)
    assert (first["attempts"], second["attempts"]) == (1, 2)
    assert first["id"] == second["id"] and first["timestamp"] == second["timestamp"]
    server.wait_for(lambda: server.get("/metrics").json()["backlogCount"] == 0)
    assert len(seen(server, name)) == 2


def test_dead_letter_after_max_retries(server: CelldServer) -> None:
    name = tag()
    send(server, tag=name, mode="throw")
    deliveries = wait_seen(server, name, 4)
    assert [(d["queue"], d["attempts"]) for d in deliveries] == [
        ("jobs", 1), ("jobs", 2), ("jobs", 3), ("dead", 1),
    ]  # fmt: skip
    assert len({d["id"] for d in deliveries}) == 1  # the dead letter keeps the id...
    assert len({d["timestamp"] for d in deliveries}) == 1  # ...and the timestamp


def test_an_acked_message_is_not_retried_when_the_handler_throws(server: CelldServer) -> None:
    acked, failing = tag(), tag()
    response = server.post(
        "/batch", json=[{"tag": acked, "mode": "ack"}, {"tag": failing, "mode": "throw"}]
    )
    assert response.status_code == 200, response.text
    deliveries = wait_seen(server, failing, 4)
    assert deliveries[-1]["queue"] == "dead"
    assert deliveries[0]["batchSize"] == 2
    assert [d["attempts"] for d in seen(server, acked)] == [1]


def test_a_batch_waits_for_its_size_or_its_timeout(server: CelldServer) -> None:
    names = [tag() for _ in range(5)]
    for name in names[:3]:  # a full batch (3) goes at once
        send(server, tag=name, queue="slow")
    for name in names[:3]:
        assert wait_seen(server, name, 1)[0]["batchSize"] == 3
    for name in names[3:]:
        send(server, tag=name, queue="slow")
    metrics = server.get("/metrics", params={"queue": "slow"}).json()
    assert metrics["backlogCount"] == 2  # waiting for a third, or the 10 s timeout
    server.advance(10_000)
    for name in names[3:]:
        assert wait_seen(server, name, 1)[0]["batchSize"] == 2


def test_delays_follow_the_clock(server: CelldServer) -> None:
    delayed, retried = tag(), tag()
    send(server, tag=delayed, delay=30)
    send(server, tag=retried, mode="retry-later")
    assert wait_seen(server, retried, 1)[0]["attempts"] == 1
    metrics = server.get("/metrics").json()
    assert metrics["backlogCount"] == 2  # one not yet visible, one waiting for its retry
    assert seen(server, delayed) == []
    server.advance(30_000)
    assert wait_seen(server, delayed, 1)[0]["attempts"] == 1
    assert len(seen(server, retried)) == 1  # its retry asked for 60 s
    server.advance(30_000)
    assert [d["attempts"] for d in wait_seen(server, retried, 2)] == [1, 2]


def test_limits_and_bad_input_are_refused_with_cloudflares_errors(server: CelldServer) -> None:
    out = server.get("/errors").json()
    assert out["big"]["error"] == {
        "name": "Error",
        "message": "Queue send failed: message length of 128001 bytes exceeds limit of 128000 "
        "(10204)",
    }
    assert out["exact"]["ok"] is True  # 128,000 bytes is allowed
    assert out["undefined"]["error"] == {
        "name": "TypeError",
        "message": "Message body cannot be undefined",
    }
    assert out["badType"]["error"]["message"] == "Unsupported queue message content type: xml"
    assert out["textNumber"]["error"]["message"] == (
        'Content Type "text" requires a value of type string, but received: number'
    )
    assert out["bytesString"]["error"]["message"] == (
        'Content Type "bytes" requires a value of type ArrayBufferView, but received: string'
    )
    assert "message delay 86401 is invalid" in out["delay"]["error"]["message"]
    assert out["batchEmpty"]["error"] == {
        "name": "TypeError",
        "message": "sendBatch() requires at least one message",
    }
    assert out["batch101"]["error"]["message"] == (
        "Queue sendBatch failed: batch message count of 101 exceeds limit of 100 (10206)"
    )
    assert out["batchBytes"]["error"]["message"] == (
        "Queue sendBatch failed: batch size of 300000 bytes exceeds limit of 256000 (10205)"
    )
    assert out["batchNotArray"]["error"]["name"] == "TypeError"
    # Nothing refused was stored: only the 128,000-byte message waits in "hold".
    assert server.get("/metrics", params={"queue": "hold"}).json()["backlogCount"] == 1


def queue_row(server: CelldServer, queue: str) -> dict[str, Any]:
    response = server.get("/cdn-cgi/celld/queues")
    assert response.status_code == 200, response.text
    rows = {row["queue"]: row for row in response.json()["result"]}
    return dict(rows[queue])


def metric(server: CelldServer, sample: str) -> float:
    for line in server.get("/cdn-cgi/celld/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no metric {sample}")


# (last: it leaves messages waiting in "hold")
def test_the_operator_sees_each_queues_depth_and_dead_letters(server: CelldServer) -> None:
    hold, jobs = queue_row(server, "hold"), queue_row(server, "jobs")
    assert hold["consumer"] == "queues-test"
    send(server, tag=tag(), queue="hold")
    send(server, tag=tag(), queue="hold")
    send(server, tag=tag(), queue="hold", delay=30)
    now = queue_row(server, "hold")
    assert (now["ready"], now["delayed"]) == (hold["ready"] + 2, hold["delayed"] + 1)
    assert now["depth"] == hold["depth"] + 3 and now["inFlight"] == 0
    assert metric(server, 'celld_queue_depth{queue="hold"}') == now["depth"]
    assert metric(server, 'celld_queue_delayed{queue="hold"}') == now["delayed"]

    name = tag()
    send(server, tag=name, mode="throw")
    wait_seen(server, name, 4)  # three failed deliveries in "jobs", then "dead"
    server.wait_for(lambda: queue_row(server, "jobs")["deadLettered"] == jobs["deadLettered"] + 1)
    assert metric(server, 'celld_queue_dead_lettered_total{queue="jobs"}') == (
        jobs["deadLettered"] + 1
    )

    command = [sys.executable, "-m", "celld", "queues", "list", "--url", server.url]
    listed = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    by_name = {row["queue"]: row for row in json.loads(listed.stdout)}
    assert by_name["hold"]["depth"] == now["depth"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    header, _, *lines = shown.splitlines()
    assert header.split()[:3] == ["Queue", "Consumer", "Depth"]
    assert any(line.split()[:3] == ["hold", "queues-test", str(now["depth"])] for line in lines)
