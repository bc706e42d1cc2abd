"""The local socket between the processes of a cluster: requests and their answers.

Each process listens on ``<cluster dir>/<index>.sock`` (a folder only this user can
enter, made by the parent). A frame is a 4-byte length and an orjson header, then a
4-byte length and raw bytes (an HTTP body; empty for binding calls). Requests carry an
id, so one connection per pair of processes carries any number of calls at once. A
*post* is a one-way frame with no id and no answer: posts from one process to another
are written in the order they were made and handled in that order, each before the next
is read (the frames of a WebSocket relayed between processes, celld.cluster.relay).

A peer that is not listening (restarting after a crash) is retried until
`CONNECT_WAIT_S` passes. A connection lost while a call is in flight gives
`PeerLost`: the caller cannot know whether the call was done; `on_lost` is told, so
what depends on the peer (relayed WebSockets) ends with it.
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
PostHandler = Callable[[dict[str, Any]], None]


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

    def __init__(self, path: Path, handler: Handler, on_post: PostHandler | None = None) -> None:
        self.path = path
        self.handler = handler
        self.on_post = on_post
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
                if "id" not in head:  # a post: handled now, so posts keep their order
                    self._posted(head)
                    continue
                task = asyncio.create_task(answer(head, body))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _posted(self, head: dict[str, Any]) -> None:
        if self.on_post is None:
            log.error("a post from another process was dropped: this process takes none")
            return
        try:
            self.on_post(head)
        except Exception:  # one bad post must not end the connection of every call
            log.exception("a post from another process failed")


class ChannelClient:
    """Calls and posts to one peer process, over one connection made when first needed."""

    def __init__(self, path: Path, on_lost: Callable[[], None] | None = None) -> None:
        self.path = path
        #: told when a connection to the peer ends (it stopped, or was killed)
        self.on_lost = on_lost
        self._posts: asyncio.Queue[bytes] | None = None
        self._poster: asyncio.Task[None] | None = None
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
            if self.on_lost is not None:
                try:
                    self.on_lost()
                except Exception:
                    log.exception("ending what depended on %s failed", self.path.name)
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

    def post(self, head: dict[str, Any]) -> None:
        """Send `head` one way, after every post made before it (no answer, no wait)."""
        if self._posts is None:
            self._posts = asyncio.Queue()
        self._posts.put_nowait(_frame(head))
        self.connect_soon()

    def connect_soon(self) -> None:
        """Connect (if not connected) and send the posts, in a task of their own: a lost
        connection is then noticed (`on_lost`) even when nothing is sent."""
        if self._posts is None:
            self._posts = asyncio.Queue()
        if self._poster is None or self._poster.done():
            self._poster = asyncio.get_running_loop().create_task(self._send_posts(self._posts))

    async def _send_posts(self, posts: asyncio.Queue[bytes]) -> None:
        frame: bytes | None = None
        while True:
            try:
                writer = await self._connect()
            except PeerUnavailable as error:
                dropped = posts.qsize() + (frame is not None)
                while not posts.empty():
                    posts.get_nowait()
                log.warning("%d posts to %s were dropped: %s", dropped, self.path.name, error)
                return
            if frame is None:
                frame = await posts.get()
                continue  # (connected again first if it was lost meanwhile)
            frame, sent = None, frame
            try:
                writer.write(sent)
                await writer.drain()
            except ConnectionError:
                log.warning("a post to %s was lost with its connection", self.path.name)

    async def close(self) -> None:
        if self._poster is not None:
            self._poster.cancel()
        if self._writer is not None:
            self._writer.close()
