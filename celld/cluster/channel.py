"""The local socket between the processes of a cluster: requests and their answers.

Each process listens on ``<cluster dir>/<index>.sock`` (a folder only this user can
enter, made by the parent). A frame is a 4-byte length and an orjson header, then a
4-byte length and raw bytes (an HTTP body; empty for binding calls). Requests carry an
id, so one connection per pair of processes carries any number of calls at once.

A peer that is not listening (restarting after a crash) is retried until
`CONNECT_WAIT_S` passes. A connection lost while a call is in flight gives
`PeerLost`: the caller cannot know whether the call was done.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("celld.cluster")

#: How long a call waits for its peer to listen again (a restart takes a second or two).
CONNECT_WAIT_S = 30.0
_LENGTH = struct.Struct(">II")

Reply = tuple[dict[str, Any], bytes]
Handler = Callable[[dict[str, Any], bytes], Awaitable[Reply]]


class PeerUnavailable(Exception):
    """The peer did not listen within CONNECT_WAIT_S: nothing was sent."""


class PeerLost(Exception):
    """The connection broke with the call in flight: it may or may not have been done."""


def socket_path(folder: Path, index: int) -> Path:
    return folder / f"{index}.sock"


async def _read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, Any], bytes]:
    head_len, body_len = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    head = orjson.loads(await reader.readexactly(head_len))
    body = await reader.readexactly(body_len) if body_len else b""
    return head, body


def _frame(head: dict[str, Any], body: bytes = b"") -> bytes:
    encoded = orjson.dumps(head)
    return _LENGTH.pack(len(encoded), len(body)) + encoded + body


class ChannelServer:
    """Answers the calls other processes send this one, each with `handler`."""

    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left by this process's predecessor, killed
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock = asyncio.Lock()

        async def answer(head: dict[str, Any], body: bytes) -> None:
            try:
                reply, reply_body = await self.handler(head, body)
            except Exception as error:  # the caller gets it; this process goes on
                log.exception("a call from another process failed")
                reply, reply_body = {"error": f"{type(error).__name__}: {error}"}, b""
            reply["id"] = head["id"]
            async with lock:
                writer.write(_frame(reply, reply_body))
                with contextlib.suppress(ConnectionError):
                    await writer.drain()

        try:
            while True:
                head, body = await _read_frame(reader)
                task = asyncio.create_task(answer(head, body))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class ChannelClient:
    """Calls to one peer process, over one connection made when first needed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ids = itertools.count(1)
        #: call id -> (its answer, the connection it was sent on)
        self._waiting: dict[int, tuple[asyncio.Future[Reply], asyncio.StreamWriter]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Lock | None = None
        self._reader: asyncio.Task[None] | None = None

    async def _connect(self) -> asyncio.StreamWriter:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CONNECT_WAIT_S
            while True:
                try:
                    reader, writer = await asyncio.open_unix_connection(str(self.path))
                    break
                except (FileNotFoundError, ConnectionError) as error:
                    if loop.time() > deadline:
                        raise PeerUnavailable(str(error)) from None
                    await asyncio.sleep(0.05)
            self._writer = writer
            self._reader = asyncio.create_task(self._read(reader, writer))
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head, body = await _read_frame(reader)
                waiting = self._waiting.pop(head.pop("id"), None)
                if waiting is not None and not waiting[0].done():
                    waiting[0].set_result((head, body))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            for call_id, (waiter, sent_on) in list(self._waiting.items()):
                if sent_on is writer:
                    self._waiting.pop(call_id)
                    if not waiter.done():
                        waiter.set_exception(PeerLost(f"lost the connection to {self.path.name}"))

    async def call(self, head: dict[str, Any], body: bytes = b"") -> Reply:
        writer = await self._connect()
        call_id = next(self._ids)
        waiter: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = (waiter, writer)
        try:
            writer.write(_frame({**head, "id": call_id}, body))
            await writer.drain()
        except ConnectionError:
            self._waiting.pop(call_id, None)
            raise PeerLost(f"lost the connection to {self.path.name}") from None
        return await waiter

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
