"""WebSockets and Queues (compat/projects/realtime) under `celld run` and `wrangler dev`,
driven by Python's `websockets` client: a Worker's own WebSocketPair (echo, the 101 answer,
close codes and reasons both ways), a Durable Object with hibernatable sockets (attachments,
tags, an auto-response), and a queue's consumer (batch shape, retries, the dead letter
queue, refused sends).

Queue deliveries are recorded in KV by the consumer; the scenarios poll for them. The
consumers use `max_batch_timeout: 0` and `retry_delay: 0`, so nothing waits for a clock.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from compat.differences import QUEUE_MESSAGE_TOO_LARGE, difference
from compat.scenario import Scenario
from compat.targets import Target

RUN = uuid.uuid4().hex[:8]
TIMEOUT_S = 30


def tag(label: str) -> str:
    return f"{label}-{RUN}-{uuid.uuid4().hex[:6]}"


def ws(target: Target, path: str) -> ClientConnection:
    return connect(target.base_url.replace("http://", "ws://") + path, open_timeout=TIMEOUT_S)


def get(target: Target, path: str, **params: str) -> Any:
    response = target.request("GET", path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def until(read: Callable[[], Any], done: Callable[[Any], bool], what: str) -> Any:
    """Poll `read()` until `done(value)`; the last value seen if it never is (fails)."""
    deadline = time.monotonic() + TIMEOUT_S
    value = read()
    while not done(value):
        assert time.monotonic() < deadline, f"timed out waiting for {what}; last {value!r}"
        time.sleep(0.05)
        value = read()
    return value


def closed_by_server(conn: ClientConnection) -> tuple[int | None, str | None]:
    """Wait for the server's close frame; its (code, reason)."""
    with pytest.raises(ConnectionClosed):
        conn.recv(timeout=TIMEOUT_S)
    return conn.close_code, conn.close_reason


# -- a Worker's own WebSocketPair ----------------------------------------------------------------


def test_worker_socket_echoes_text_and_binary(realtime_target: Target) -> None:
    """Text arrives as text and binary as bytes (binaryType "arraybuffer"), both ways, in
    order."""
    with ws(realtime_target, "/echo") as conn:
        conn.send("hello")
        assert conn.recv(timeout=TIMEOUT_S) == "echo: hello"
        conn.send(bytes([0, 1, 254]))
        assert conn.recv(timeout=TIMEOUT_S) == bytes([255, 254, 1])
        for n in range(5):
            conn.send(f"m{n}")
        assert [conn.recv(timeout=TIMEOUT_S) for _ in range(5)] == [f"echo: m{n}" for n in range(5)]


def test_worker_socket_default_binary_type(realtime_target: Target) -> None:
    """An accepted socket's binaryType before the Worker sets it ("blob": the project's
    date is past 2026-03-17), and what a binary message then arrives as (a Blob)."""
    with ws(realtime_target, "/echo?binary=default") as conn:
        assert ask(conn, "binaryType") == "blob blob"
        assert ask(conn, bytes([7])) == "not an ArrayBuffer: [object Blob]"


def test_the_101_answer(realtime_target: Target) -> None:
    """The upgrade answers 101 with the handshake headers and the Worker's own; without an
    Upgrade header the Worker's ordinary answer comes back."""
    with ws(realtime_target, "/echo") as conn:
        response = conn.response
        assert response is not None
        assert (response.status_code, response.reason_phrase) == (101, "Switching Protocols")
        headers = {k.lower(): v for k, v in response.headers.raw_items()}
        assert headers["upgrade"].lower() == "websocket"
        assert headers["connection"].lower() == "upgrade"
        assert headers["x-echo"] == "yes"
        assert "sec-websocket-accept" in headers  # checked by the client against its key
    plain = realtime_target.request("GET", "/echo")
    assert (plain.status_code, plain.text) == (426, "Expected Upgrade: websocket")


def test_worker_socket_closed_by_the_server(realtime_target: Target) -> None:
    """server.close(code, reason) reaches the client as that code and reason."""
    with ws(realtime_target, "/echo") as conn:
        conn.send("close 4001 done here")
        assert closed_by_server(conn) == (4001, "done here")


def test_worker_socket_closed_by_the_client(realtime_target: Target) -> None:
    """The client's close code and reason reach the Worker's close event (wasClean true)."""
    key = tag("echo-close")
    with ws(realtime_target, f"/echo?key={key}") as conn:
        conn.send("hi")
        assert conn.recv(timeout=TIMEOUT_S) == "echo: hi"
        conn.close(4002, "client left")
    lines = until(lambda: get(realtime_target, "/log", key=key), bool, "the close event")
    assert lines == ["4002 client left true"]


# -- a Durable Object's hibernatable sockets -----------------------------------------------------


def room(target: Target, name: str, who: str, team: str) -> ClientConnection:
    return ws(target, f"/room?room={name}&name={who}&team={team}")


def ask(conn: ClientConnection, text: str) -> Any:
    conn.send(text)
    return conn.recv(timeout=TIMEOUT_S)


def test_object_sockets_attachments_and_tags(realtime_target: Target) -> None:
    """acceptWebSocket(ws, tags): attachments come back as stored (and as changed),
    getWebSockets(tag) finds each tag's sockets, getTags the socket's own."""
    name = tag("room")
    with (
        room(realtime_target, name, "ann", "red") as ann,
        room(realtime_target, name, "bob", "red") as bob,
        room(realtime_target, name, "cy", "blue") as cy,
    ):
        assert json.loads(ask(ann, "who")) == {"name": "ann", "team": "red", "joined": 1}
        assert json.loads(ask(cy, "who")) == {"name": "cy", "team": "blue", "joined": 3}
        assert json.loads(ask(bob, "tags")) == ["bob", "team:red"]
        assert ask(ann, "count team:red") == "2"
        assert ask(ann, "count team:blue") == "1"
        assert ask(ann, "count nobody") == "0"
        assert ask(ann, "count") == "3"
        assert json.loads(ask(cy, "names team:red")) == ["ann", "bob"]
        assert ask(bob, "rename robert") == "renamed"
        assert json.loads(ask(ann, "names team:red")) == ["ann", "robert"]
        assert json.loads(ask(bob, "who")) == {"name": "robert", "team": "red", "joined": 2}
        assert ask(cy, bytes([1, 2, 3])) == bytes([3, 2, 1])
        assert ask(cy, "anything") == "room heard: anything"


def test_object_auto_response(realtime_target: Target) -> None:
    """setWebSocketAutoResponse answers "ping" with "pong" without the handler, and
    getWebSocketAutoResponseTimestamp is null until then and a Date after."""
    with room(realtime_target, tag("auto"), "pat", "red") as conn:
        assert ask(conn, "ts") == "null"
        assert ask(conn, "ping") == "pong"
        assert ask(conn, "ts") == "number"
        assert ask(conn, "ping pong") == "room heard: ping pong"  # only the exact request


def test_object_socket_closed_by_the_client(realtime_target: Target) -> None:
    """webSocketClose gets the client's code and reason; the object's own close answers it."""
    who = tag("leaver")
    with room(realtime_target, tag("close"), who, "red") as conn:
        assert json.loads(ask(conn, "who"))["name"] == who
        conn.close(4003, "gone away")
    key = f"room:{who}"
    lines = until(lambda: get(realtime_target, "/log", key=key), bool, "webSocketClose")
    assert lines == ["4003 gone away true"]


# -- Queues --------------------------------------------------------------------------------------


def seen(target: Target, name: str, count: int) -> list[dict[str, Any]]:
    """The deliveries of the messages tagged `name`, once there are `count` of them."""
    return list(until(lambda: get(target, "/seen", tag=name), lambda s: len(s) >= count, name))


def assert_send_result(answer: dict[str, Any]) -> None:
    """send()/sendBatch() resolve to {metadata: {metrics: {backlogCount, backlogBytes}}},
    with the oldest message's timestamp while the backlog is not empty (the counts depend on
    what the consumer took already; wrangler dev's local broker always reports 0)."""
    assert answer["ok"] is True, answer
    metrics = dict(answer["value"]["metadata"]["metrics"])
    oldest = metrics.pop("oldestMessageTimestamp", None)
    assert sorted(metrics) == ["backlogBytes", "backlogCount"]
    assert all(isinstance(v, int) and v >= 0 for v in metrics.values())
    assert (oldest is not None) == (metrics["backlogCount"] > 0), answer


def test_queue_batch_shape(realtime_target: Target) -> None:
    """sendBatch's messages reach the consumer in one batch, in order, each with its id,
    timestamp, body and attempts 1; the batch names its queue."""
    name = tag("batch")
    bodies = [{"tag": name, "mode": "ok", "n": n} for n in range(3)]
    response = realtime_target.request("POST", "/send-batch", json=bodies)
    assert_send_result(response.json())
    found = seen(realtime_target, name, 3)
    assert [d["body"] for d in found] == bodies
    for delivery in found:
        assert delivery == {
            "queue": "rt-jobs",
            "batchSize": 3,
            "keys": ["attempts", "body", "timestamp", "id"],
            "id": "string",
            "idLength": 32,
            "timestamp": True,
            "attempts": 1,
            "body": delivery["body"],
        }


def test_queue_send_answers_the_backlog(realtime_target: Target) -> None:
    """send() resolves to the queue's backlog metrics; the message arrives with attempts 1."""
    name = tag("send")
    response = realtime_target.request("POST", "/send", params={"tag": name})
    assert_send_result(response.json())
    [delivery] = seen(realtime_target, name, 1)
    assert (delivery["queue"], delivery["attempts"], delivery["body"]["tag"]) == (
        "rt-jobs",
        1,
        name,
    )


def test_queue_retry_then_success(realtime_target: Target) -> None:
    """message.retry() redelivers the message with attempts 2; acked then, it stays acked."""
    name = tag("retry")
    realtime_target.request("POST", "/send", params={"tag": name, "mode": "retry-once"})
    found = seen(realtime_target, name, 2)
    assert [(d["queue"], d["attempts"]) for d in found] == [("rt-jobs", 1), ("rt-jobs", 2)]
    assert found[0]["body"] == found[1]["body"]


def test_queue_dead_letter_after_max_retries(realtime_target: Target) -> None:
    """A message retried every time is delivered 1 + max_retries (2) times, then moves to the
    dead letter queue, where it starts again at attempts 1."""
    name = tag("dead")
    realtime_target.request("POST", "/send", params={"tag": name, "mode": "retry-always"})
    found = seen(realtime_target, name, 4)
    assert [(d["queue"], d["attempts"]) for d in found] == [
        ("rt-jobs", 1),
        ("rt-jobs", 2),
        ("rt-jobs", 3),
        ("rt-dead", 1),
    ]


@difference(wrangler=QUEUE_MESSAGE_TOO_LARGE)
def test_queue_message_too_large(realtime_target: Target, request: pytest.FixtureRequest) -> None:
    """A message over 128,000 bytes is refused."""
    sc = Scenario(realtime_target, request.node)
    out = get(realtime_target, "/errors")
    assert out["big"] == {
        "ok": False,
        "error": sc.pick(
            celld={
                "name": "Error",
                "message": "Queue send failed: message length of 128001 bytes exceeds limit "
                "of 128000 (10204)",
            },
            wrangler={"name": "Error", "message": "Unknown Internal Error (15000)"},
        ),
    }


def test_queue_send_batch_empty(realtime_target: Target) -> None:
    """sendBatch([]) throws a TypeError."""
    out = get(realtime_target, "/errors")
    assert out["batchEmpty"] == {
        "ok": False,
        "error": {"name": "TypeError", "message": "sendBatch() requires at least one message"},
    }


def test_worker_socket_misuse_errors(realtime_target: Target) -> None:
    """What a Worker gets for using a WebSocketPair wrongly: a 101 without a socket, a send
    before accept() or after close(), a close code or reason workerd refuses."""
    assert get(realtime_target, "/ws-errors") == {
        "response101": "RangeError: Responses may only be constructed with status codes in the "
        "range 200 to 599, inclusive.",
        "sendBeforeAccept": "TypeError: You must call one of accept() or "
        "state.acceptWebSocket() on this WebSocket before sending messages.",
        "readyState": 1,
        "close999": "InvalidAccessError: Invalid WebSocket close code: 999.",
        "longReason": "SyntaxError: WebSocket close reason must not be longer than 123 bytes "
        "when UTF-8 encoded.",
        "closedState": 2,
        "sendAfterClose": "TypeError: Can't call WebSocket send() after close().",
    }
