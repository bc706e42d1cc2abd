"""A client's WebSocket upgrade: the Worker answers it, the host carries the frames.

uvicorn (with the `websockets` library's sans-I/O protocol) hands an ``Upgrade:
websocket`` request to the app as an ASGI ``websocket`` scope. The Worker's fetch
handler gets it as an ordinary GET with its upgrade headers; if it answers 101 with a
``webSocket`` (the client end of a WebSocketPair, made here or in a Durable Object), the
upgrade is accepted and that end is attached to this connection
(celld/isolate/websockets.py): what the client sends, the other end receives, and the
reverse. Any other answer is sent to the client as the HTTP response it is (ASGI's
``websocket.http.response``), as workerd refuses an upgrade the Worker did not accept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.types import Receive, Scope, Send

from celld.isolate.websockets import (
    GONE_REASON,
    MAX_BUFFERED_BYTES,
    End,
    Event,
    SocketHub,
    event_data,
    event_size,
    message_event,
)
from celld.isolate.worker_pool import WorkerError, WorkerPool
from celld.server.request_log import log_request

log = logging.getLogger("celld.server")


class _RefusalNotAFailure(logging.Filter):
    """uvicorn's sans-I/O protocol logs an error after an upgrade answered with a plain
    HTTP response (its `handshake_complete` is only set by an accept): that answer is what
    the Worker chose, not a failure, so that one record is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


logging.getLogger("uvicorn.error").addFilter(_RefusalNotAFailure())


class ConnectionSink:
    """An end whose other side is the client's connection: frames go out in order from
    one writer task; a client that stops reading is closed once `MAX_BUFFERED_BYTES` wait."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.buffered = 0
        self.closed = False

    def deliver(self, end: End, event: Event) -> None:
        if self.closed:
            return
        self.buffered += event_size(event)
        if self.buffered > MAX_BUFFERED_BYTES:
            self.closed = True
            log.warning("a WebSocket client stopped reading; closing it (1009)")
            self._queue.put_nowait({"ev": "close", "code": 1009, "reason": "too much buffered"})
            return
        self._queue.put_nowait(event)
        if event.get("ev") == "close":
            self.closed = True

    async def write(self) -> None:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            if event.get("ev") == "close":
                code = event.get("code")
                await self._send(
                    {
                        "type": "websocket.close",
                        "code": code if isinstance(code, int) and code != 1005 else 1000,
                        "reason": event.get("reason") or "",
                    }
                )
                return
            self.buffered -= event_size(event)
            data = event_data(event)
            if isinstance(data, str):
                await self._send({"type": "websocket.send", "text": data})
            else:
                await self._send({"type": "websocket.send", "bytes": data})

    def stop(self) -> None:
        self._queue.put_nowait(None)


#: headers the WebSocket handshake itself writes
_HANDSHAKE_HEADERS = ("sec-websocket-protocol", "upgrade", "connection", "content-length")


def http_url(scope: Scope) -> str:
    """The URL the Worker sees for an upgrade: http(s), as workerd shows it."""
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
    if host is None:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    raw = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    return f"{scheme}://{host}{raw.decode('latin-1')}" + (
        f"?{query.decode('latin-1')}" if query else ""
    )


def socket_app(get_pool: Callable[[], WorkerPool], hub: Callable[[], SocketHub | None]) -> Any:
    """The ASGI app of websocket scopes."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        try:
            answer = await get_pool().handle("GET", http_url(scope), headers, b"")
        except WorkerError as error:
            log.error(
                "GET %s: Uncaught %s: %s\n%s", scope["path"], error.name, error.message, error.stack
            )
            await _refuse(
                send, 500, f"Worker threw exception: {error.name}: {error.message}\n".encode()
            )
            log_request("GET", scope["path"], 500, started)
            return
        sockets = hub()
        if answer.web_socket is None or sockets is None:
            answer.release(None)
            await _refuse(send, answer.status, answer.body, answer.headers)
            log_request("GET", scope["path"], answer.status, started)
            return
        end = sockets.end(answer.web_socket)
        protocol = next(
            (v for k, v in answer.headers if k.lower() == "sec-websocket-protocol"), None
        )
        extra = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in answer.headers
            if k.lower() not in _HANDSHAKE_HEADERS
        ]
        await send({"type": "websocket.accept", "subprotocol": protocol, "headers": extra})
        log_request("GET", scope["path"], 101, started)
        sink = ConnectionSink(send)
        writer = asyncio.get_running_loop().create_task(sink.write())
        sockets.attach(end, sink)
        try:
            while True:
                message = await receive()
                if message["type"] == "websocket.receive":
                    data = message.get("text")
                    sockets.send(
                        end,
                        message_event(data if data is not None else message.get("bytes") or b""),
                    )
                elif message["type"] == "websocket.disconnect":
                    code = int(message.get("code", 1005))
                    reason = message.get("reason") or ""
                    if code == 1006:
                        sockets.gone(end, 1006, GONE_REASON)
                    else:
                        closing = {"ev": "close", "code": code, "reason": reason, "clean": True}
                        sockets.send(end, closing)
                        end.closed_in = True  # nothing more reaches this client
                    return
        except (OSError, asyncio.CancelledError):
            sockets.gone(end)
            raise
        finally:
            sink.closed = True
            sink.stop()
            writer.cancel()
            answer.release(None)

    return serve


async def _refuse(
    send: Send, status: int, body: bytes, headers: list[tuple[str, str]] | None = None
) -> None:
    """An upgrade the Worker did not accept: its response goes out as plain HTTP."""
    raw = [
        (k.lower().encode("latin-1"), v.encode("latin-1"))
        for k, v in headers or []
        if k.lower() != "content-length"
    ] + [(b"content-length", str(len(body)).encode())]
    await send({"type": "websocket.http.response.start", "status": status, "headers": raw})
    await send({"type": "websocket.http.response.body", "body": body})
