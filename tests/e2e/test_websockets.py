"""WebSockets against a real `celld run`, driven by Python's `websockets` client.

tests/projects/websockets: a Worker's own WebSocketPair (/echo), outbound sockets to a
server this test runs (/outbound, /outbound-fetch), and a Durable Object shaped like the
/ws route of Cloudflare's Workflows starter template (hibernation API, a workflow that
reports its steps to every client). The object's idle eviction runs on the test clock.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.celld_server import CelldServer

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "websockets"
WAIT_S = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECT, tmp_path_factory.mktemp("ws") / "state", manual_clock=True)
    celld.start()
    yield celld
    celld.stop()


def ws_url(server: CelldServer, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


def metric(server: CelldServer, name: str) -> float:
    text = server.get("/cdn-cgi/celld/metrics").text
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_S
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_worker_pair_echoes_text_and_binary_and_closes_both_ways(server: CelldServer) -> None:
    async with connect(ws_url(server, "/echo")) as ws:
        assert ws.response.status_code == 101
        assert ws.response.headers["x-echo"] == "yes"
        await ws.send("hi")
        assert await ws.recv() == "echo: hi"
        await ws.send(bytes([0, 1, 254]))  # a Blob (the project's date is past 2026-03-17)
        assert await ws.recv() == 'Blob 3 type=""'
        assert await ws.recv() == bytes([255, 254, 1])
        await ws.send("state")
        assert await ws.recv() == "readyState 1"
        await ws.send("close 4005")
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert (ws.close_code, ws.close_reason) == (4005, "server closed")
    async with connect(ws_url(server, "/echo")) as ws:
        await ws.close(4002, "client bye")
    await until(
        lambda: "worker close 4002 client bye true" in server.get("/log").json(), "the close"
    )
    assert "worker close 4005 server closed true" in server.get("/log").json()


async def test_binary_type_starts_at_blob_and_can_be_set(server: CelldServer) -> None:
    """The project's compatibility date (2026-11-01) is past 2026-03-17: an accepted socket
    starts at "blob"; "arraybuffer" can be set, anything else is ignored as workerd does."""
    async with connect(ws_url(server, "/echo")) as ws:
        await exchange(
            ws,
            ("binaryType", "binaryType blob"),
            (bytes([9]), 'Blob 1 type=""'),
        )
        assert await ws.recv() == bytes([246])
        await exchange(
            ws,
            ("binaryType text", "binaryType blob"),
            ("binaryType arraybuffer", "binaryType arraybuffer"),
            (bytes([0, 255]), bytes([255, 0])),
            ("binaryType Blob", "binaryType arraybuffer"),
            ("binaryType blob", "binaryType blob"),
            (b"", 'Blob 0 type=""'),
        )
        assert await ws.recv() == b""


async def test_an_upgrade_the_worker_refuses_is_its_http_answer(server: CelldServer) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(ws_url(server, "/nowhere")):
            pass
    assert refused.value.response.status_code == 404
    assert refused.value.response.body == b"not found"


def test_workerd_errors(server: CelldServer) -> None:
    assert server.get("/errors").json() == [
        "RangeError: Responses may only be constructed with status codes in the range 200 to "
        "599, inclusive.",
        "TypeError: You must call one of accept() or state.acceptWebSocket() on this WebSocket "
        "before sending messages.",
        "InvalidAccessError: Invalid WebSocket close code: 999.",
        "readyState 1",
        "readyState 2",
        "TypeError: Can't call WebSocket send() after close().",
    ]
    assert server.get("/echo").status_code == 426


def test_exports_holds_the_workers_own_object_classes(server: CelldServer) -> None:
    assert server.get("/exports").json() == {
        "names": ["Log", "WorkflowStatus"],
        "same": True,
        "lines": True,
    }


async def test_a_message_over_one_mib_closes_the_socket(server: CelldServer) -> None:
    async with connect(ws_url(server, "/echo"), max_size=None) as ws:
        await ws.send("x" * (1 << 20))
        assert await ws.recv() == "echo: " + "x" * (1 << 20)
        await ws.send("x" * ((1 << 20) + 1))
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1009


@pytest_asyncio.fixture
async def outside() -> AsyncIterator[str]:
    """An outside WebSocket server: answers each message with what it got, then closes
    with 4100 when the client does not."""

    async def handler(connection: ServerConnection) -> None:
        async for message in connection:
            kind = "text" if isinstance(message, str) else f"bytes {len(message)}"
            await connection.send(f"got {kind}")

    async with serve(handler, "127.0.0.1", 0) as running:
        port = next(iter(running.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/"


@pytest.mark.parametrize("path", ["/outbound", "/outbound-fetch"])
async def test_outbound_websocket(server: CelldServer, outside: str, path: str) -> None:
    answer = await asyncio.to_thread(server.get, path, params={"url": outside})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"replies": ["got text", "got bytes 3"], "close": "1000 done"}


async def test_outbound_refused_connection_is_an_error(server: CelldServer) -> None:
    answer = await asyncio.to_thread(server.get, "/outbound", params={"url": "ws://127.0.0.1:9/"})
    assert answer.status_code == 500
    assert "WebSocket connection to ws://127.0.0.1:9/ failed" in answer.text


async def exchange(socket: Any, *turns: tuple[str | bytes, str | bytes]) -> None:
    """Send each message and check the answer (JSON answers compared as parsed values)."""
    for sent, expected in turns:
        await socket.send(sent)
        answer = await socket.recv()
        if isinstance(expected, str) and expected[:1] in "[{":
            assert json.loads(answer) == json.loads(expected), (sent, answer)
        else:
            assert answer == expected, (sent, answer)


async def test_hibernating_object_wakes_with_its_sockets(server: CelldServer) -> None:
    url = ws_url(server, "/ws?instanceId=room1&name=")
    async with connect(url + "ada") as ada, connect(url + "bob") as bob:
        assert json.loads(await ada.recv())["type"] == "hello"
        assert json.loads(await bob.recv())["type"] == "hello"
        await exchange(
            ada,
            ("who", '{"name":"ada","joined":1}'),
            ("count all", "2"),
            ("count bob", "1"),
            ("tags", '["ada","all"]'),
            ("rename ada2", "renamed"),
            (
                "big-attachment",
                "Error: A WebSocket 'attachment' cannot be larger than 2048 bytes."
                "'attachment' was 4006 bytes.",
            ),
            (bytes([1, 2, 3]), bytes([3, 2, 1])),
            ("hello everyone", "ada2: hello everyone"),
        )
        assert await bob.recv() == "ada2: hello everyone"
        await ada.send("constructed")
        before = await ada.recv()

        # Idle: the object is evicted, the host keeps both sockets open.
        evictions = metric(server, "celld_objects_evictions_total")
        server.post("/cdn-cgi/celld/clock", params={"advance": 61_000})
        await until(
            lambda: metric(server, "celld_objects_evictions_total") > evictions, "the eviction"
        )
        activations = metric(server, "celld_objects_activations_total")
        await ada.send("ping")  # answered by the host: the object stays asleep
        assert await ada.recv() == "pong"
        assert metric(server, "celld_objects_activations_total") == activations

        await ada.send("constructed")  # wakes it: the constructor runs again
        assert await ada.recv() != before
        await ada.send("who")  # attachments and tags came back with it
        assert json.loads(await ada.recv()) == {"name": "ada2", "joined": 1}
        await ada.send("count all")
        assert await ada.recv() == "2"
        await ada.send("ts")
        assert int(await ada.recv()) > 1_600_000_000_000

        await steps_then_closes(ada, bob, server.get)


async def steps_then_closes(ada: Any, bob: Any, get: Callable[[str], Any]) -> None:
    """Two clients of room1: the workflow's steps reach both through the object, then bob
    leaves (ada hears it) and the object closes ada; `get(path)` asks the Worker."""
    made = await asyncio.to_thread(get, "/workflow?id=room1")
    assert made.status_code == 200, made.text
    for client in (ada, bob):
        steps = [json.loads(await client.recv()) for _ in range(3)]
        assert [s["step"] for s in steps] == ["fetch data", "process", "store"]
    await bob.close(4001, "leaving")
    assert await ada.recv() == "left: bob"
    await ada.send("close 7")
    with pytest.raises(ConnectionClosed):
        await ada.recv()
    assert (ada.close_code, ada.close_reason) == (4007, "closed by the object")
    lines = (await asyncio.to_thread(get, "/log")).json()
    assert "close bob 4001 leaving true" in lines


async def test_restart_closes_sockets_with_1012_and_clients_reconnect(
    tmp_path: Path,
) -> None:
    celld = CelldServer(PROJECT, tmp_path / "state", manual_clock=True)
    celld.start()
    try:
        url = ws_url(celld, "/ws?instanceId=restart&name=ada")
        async with connect(url) as ws:
            await ws.recv()
            await asyncio.to_thread(celld.stop)
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1012
        celld.start()
        async with connect(ws_url(celld, "/ws?instanceId=restart&name=bob")) as ws:
            await ws.recv()
            await ws.send("count all")
            assert await ws.recv() == "1"  # the old socket did not survive the restart
    finally:
        celld.stop()


def socket_rows(server: CelldServer) -> list[dict[str, object]]:
    response = server.get("/cdn-cgi/celld/objects/websockets")
    assert response.status_code == 200, response.text
    return list(response.json()["result"])


async def test_the_operator_sees_objects_with_their_open_sockets(server: CelldServer) -> None:
    url = ws_url(server, "/ws?instanceId=surface&name=")
    async with connect(url + "ada") as ada, connect(url + "bob") as bob:
        assert json.loads(await ada.recv())["type"] == "hello"
        assert json.loads(await bob.recv())["type"] == "hello"
        [row] = [r for r in socket_rows(server) if r["websockets"] == 2]
        assert (row["worker"], row["class"]) == ("celld-websockets", "WorkflowStatus")
        labels = f'worker="celld-websockets",class="WorkflowStatus",id="{row["id"]}"'
        sample = f"celld_object_websockets{{{labels}}}"
        text = server.get("/cdn-cgi/celld/metrics").text
        assert f"{sample} 2" in text.splitlines()
        await bob.close()
        assert await ada.recv() == "left: bob"
        await until(
            lambda: [r["websockets"] for r in socket_rows(server) if r["id"] == row["id"]] == [1],
            "the closed socket to leave the count",
        )
    await until(
        lambda: all(r["id"] != row["id"] for r in socket_rows(server)), "the object's last socket"
    )


async def test_event_timeout_resets_an_object_whose_handler_runs_past_it(
    server: CelldServer,
) -> None:
    """setHibernatableWebSocketEventTimeout: workerd's argument checks; a handler still
    running when the timeout passes (on the test clock) is cancelled and the object reset
    (its in-memory state gone); the socket stays open, the next message wakes a new
    instance, and the timeout is still set."""
    async with connect(ws_url(server, "/ws?instanceId=timeout1&name=tim")) as tim:
        assert json.loads(await tim.recv())["type"] == "hello"
        await exchange(
            tim,
            ("timeout", "timeout null"),
            ("timeout 604800001", "Error: Event timeout should not exceed 604800000 ms."),
            (
                "timeout -1",
                "TypeError: The value cannot be converted because it is negative and this API "
                "expects a positive number.",
            ),
            ("timeout 604800000", "timeout 604800000"),
            ("timeout 0", "timeout null"),
            ("timeout 500", "timeout 500"),
            ("slow 1", "slow started 1"),
        )
        assert await tim.recv() == "slow done 1"  # well within its timeout
        await exchange(tim, ("slows", "slows 1"))
        await tim.send("constructed")
        before = await tim.recv()
        resets = metric(server, "celld_objects_activations_total")
        # waits an hour of wall time: the timeout (500 ms of the test clock) ends it
        await exchange(tim, ("slow 3600000", "slow started 2"))
        server.post("/cdn-cgi/celld/clock", params={"advance": 1_000})
        await exchange(tim, ("slows", "slows 0"))  # a new instance answers
        await tim.send("constructed")
        assert await tim.recv() != before
        assert metric(server, "celld_objects_activations_total") == resets + 1
        await exchange(tim, ("timeout", "timeout 500"), ("who", '{"name":"tim","joined":1}'))
