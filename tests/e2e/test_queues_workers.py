"""Queues across the Workers of one `celld run` (tests/projects/queues_workers): the served
Worker "q-sender" sends to "handoff", the other Worker "q-receiver" consumes it and records
each message in its own KV, which q-sender reads back through a service binding."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS

SENDER = PROJECTS / "queues_workers" / "sender"
RECEIVER = PROJECTS / "queues_workers" / "receiver"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    state = tmp_path_factory.mktemp("queues-workers") / "state"
    celld = CelldServer(SENDER, state, args=(str(RECEIVER),))
    celld.start(timeout=90)
    yield celld
    celld.stop()


def seen(server: CelldServer, tag: str) -> Any:
    response = server.get("/seen", params={"tag": tag})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_message_sent_by_one_worker_is_consumed_by_the_other(server: CelldServer) -> None:
    tag = uuid.uuid4().hex[:12]
    response = server.post("/send", params={"tag": tag})
    assert response.json() == {"sent": tag}
    record = server.wait_for(lambda: seen(server, tag))
    assert record == {
        "queue": "handoff",
        "body": {"tag": tag, "from": "q-sender"},
        "attempts": 1,
    }


def test_the_session_keeps_one_queue_file_in_the_first_workers_state(
    server: CelldServer,
) -> None:
    assert (server.state / "queues.sqlite3").is_file()
    assert not (server.state / "workers" / "q-receiver" / "queues.sqlite3").exists()


def test_messages_sent_before_a_restart_reach_the_other_worker_after_it(
    server: CelldServer,
) -> None:
    tags = [uuid.uuid4().hex[:12] for _ in range(5)]
    for tag in tags:
        assert server.post("/send", params={"tag": tag}).status_code == 200
    server.stop()
    server.start(timeout=90)
    for tag in tags:
        assert server.wait_for(lambda tag=tag: seen(server, tag))["body"]["tag"] == tag
