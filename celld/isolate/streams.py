"""Bodies that stream across the bridge, both ways, in bounded pieces.

A body too large to be one message (a Worker's `ReadableStream` response, a request body,
an R2 object, a `fetch()` response, an `R2.put` of a stream) crosses as a host stream named
by an id, one piece per message, as base64 (the bridge carries text only): at most
`PIECE_BYTES` from JS, at most `READ_BYTES` to JS. JS writes a piece into its message's text
as it is, and the host hands pieces to JS after the turn's JSON (`Piece`): no piece is ever
escaped or parsed as JSON, which in QuickJS costs several times what its base64 does. Two
kinds:

* a *source* (host to JS): JS reads it with `stream.read`, one piece per read, when its
  `ReadableStream` is pulled (and one piece ahead), and drops it with `stream.cancel`. A
  consumer on the host (an HTTP response, an R2 put, a fetch body) may instead `take` it
  whole, so bytes that pass through a Worker untouched never enter the isolate.
* a *pipe* (JS to host): JS opens it (`pipe.open`, with an id JS chose, so no round trip),
  writes pieces (`pipe.write`, answered once the pipe holds at most `HIGH_WATER_BYTES`: the
  writer waits while the consumer is slow) and closes or aborts it. One consumer on the
  host reads it (`attach`); a consumer that goes away (`cancel`) fails the writes.

Every message is an ordinary operation of the isolate's outbox, so the output gate covers
stream pieces like any other message.

Nothing holds more than a few pieces per stream: a source reads its iterator only when
asked, a pipe answers writes only while it has room, and JS keeps at most a window of
writes in flight (js/web/hoststreams.js). Streams nobody uses for `IDLE_S` (their isolate
died, their request ended without JS releasing them) are closed when the next one opens.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pybase64

from celld.isolate.host import HostError, Later, OpHandler
from celld.isolate.isolate import Piece

log = logging.getLogger("celld.isolate")

#: The largest piece JS writes in one message (base64 makes it a third larger on the bridge).
PIECE_BYTES = 64 * 1024
#: The most one read by JS takes (what is already buffered, or the next chunk, up to this).
READ_BYTES = 256 * 1024
#: A pipe answers a write at once while it holds at most this much; later, once drained.
HIGH_WATER_BYTES = 256 * 1024
#: A stream nobody read, wrote or attached for this long (s) is closed.
IDLE_S = 300.0


class StreamAborted(Exception):  # noqa: N818 - it names what happened to the body
    """The writer of a pipe gave up (its stream errored, its isolate stopped): the body is
    incomplete. `stack` is the JS stack of the error, when there was one."""

    def __init__(self, reason: str, stack: str = "", name: str = "Error") -> None:
        super().__init__(reason)
        self.stack = stack
        self.name = name  # the JS error's name, to raise it again in JS (`as_host_error`)

    def as_host_error(self, what: str) -> HostError:
        """The error for JS of an operation `what` that this stopped."""
        message = str(self)
        if message.startswith(f"{self.name}: "):
            message = message[len(self.name) + 2 :]
        return HostError(f"{what}: {message}" if what else message, self.name)


class Source:
    """Bytes the host has for JS (or for another host consumer), read piece by piece."""

    __slots__ = (
        "_chunks",
        "_close",
        "_rest",
        "length",
        "last_used",
        "busy",
        "close_after_read",
        "_closed",
    )

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        close: Callable[[], Awaitable[None]] | None = None,
        length: int | None = None,
    ) -> None:
        self._chunks = chunks
        self._close = close
        self._rest = memoryview(b"")  # what is left of the last chunk read
        #: The body's length when it is known in advance (a Content-Length to send).
        self.length = length
        self.last_used = time.monotonic()
        self.busy = False  # a read is under way
        self.close_after_read = False  # dropped during that read: close when it ends
        self._closed = False

    async def read(self) -> bytes | None:
        """The next piece (at most READ_BYTES), None at the end."""
        if self.busy:
            raise HostError("the stream is already being read", "TypeError")
        self.busy = True
        try:
            self.last_used = time.monotonic()
            while not self._rest:
                try:
                    chunk = await anext(self._chunks)
                except StopAsyncIteration:
                    await self.aclose()
                    return None
                self._rest = memoryview(chunk)
            piece, self._rest = self._rest[:READ_BYTES], self._rest[READ_BYTES:]
            return bytes(piece)
        finally:
            self.busy = False
            self.last_used = time.monotonic()
            if self.close_after_read:
                await self.aclose()

    async def chunks(self) -> AsyncIterator[bytes]:
        """Everything left, as it comes (for a consumer that took the source)."""
        try:
            if self._rest:
                rest, self._rest = bytes(self._rest), memoryview(b"")
                yield rest
            async for chunk in self._chunks:
                yield chunk
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._close is not None:
                await self._close()
            else:
                closer = getattr(self._chunks, "aclose", None)
                if closer is not None:
                    await closer()
        except Exception:  # noqa: BLE001 - closing must not fail the reader; logged
            log.warning("closing a body stream failed", exc_info=True)


class Pipe:
    """Bytes JS writes for one consumer on the host, with back-pressure."""

    __slots__ = (
        "high_water",
        "_queue",
        "_queued",
        "_writers",
        "_wake",
        "_closed",
        "_aborted",
        "_stack",
        "_name",
        "_cancelled",
        "attached",
        "last_used",
    )

    def __init__(self, high_water: int = HIGH_WATER_BYTES) -> None:
        self.high_water = high_water
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._writers: deque[Later] = deque()  # writes answered once there is room
        self._wake: asyncio.Future[None] | None = None
        self._closed = False  # the writer closed it: the body is complete
        self._aborted: str | None = None  # the writer gave up: why
        self._stack = ""
        self._name = "Error"
        self._cancelled: str | None = None  # the consumer went away: why
        self.attached = False
        self.last_used = time.monotonic()

    @property
    def finished(self) -> bool:
        """The writer closed or aborted it: nothing more will be written."""
        return self._closed or self._aborted is not None

    @property
    def queued(self) -> int:
        """Bytes written and not yet taken by the consumer."""
        return self._queued

    def write(self, data: bytes) -> Later | None:
        """Queue `data`; None when the pipe still has room (the write is answered now),
        else a Later answered once the consumer has drained it below the high-water mark."""
        if self._cancelled is not None:
            raise HostError(self._cancelled, "TypeError")
        if self.finished:
            raise HostError("the stream was already closed", "TypeError")
        self.last_used = time.monotonic()
        if data:
            self._queue.append(data)
            self._queued += len(data)
            self._notify()
        if self._queued <= self.high_water:
            return None
        later = Later()
        self._writers.append(later)
        return later

    def close(self) -> None:
        if not self.finished:
            self._closed = True
            self._notify()

    def abort(self, reason: str, stack: str = "", name: str = "Error") -> None:
        if not self.finished:
            self._aborted = reason or "the stream was aborted"
            self._stack = stack
            self._name = name
            self._notify()

    def cancel(self, reason: str) -> None:
        """The consumer is gone: drop what is queued and fail the writes, now and later."""
        if self._cancelled is not None:
            return
        self._cancelled = reason
        self._queue.clear()
        self._queued = 0
        writers, self._writers = self._writers, deque()
        for later in writers:
            later.reject(HostError(reason, "TypeError"))
        self._notify()

    def _notify(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _drained(self) -> None:
        while self._writers and self._queued <= self.high_water:
            self._writers.popleft().resolve(None)

    async def chunks(self) -> AsyncIterator[bytes]:
        """What the writer sends, as it comes; ends when it closes, raises StreamAborted
        when it aborts (or the pipe was cancelled while its consumer still read)."""
        while True:
            if self._queue:
                # Everything queued at once (at most the high-water mark and a window of
                # writes): one send to the client instead of one per piece.
                if len(self._queue) == 1:
                    data = self._queue.popleft()
                else:
                    data = b"".join(self._queue)
                    self._queue.clear()
                self._queued -= len(data)
                self.last_used = time.monotonic()
                self._drained()
                yield data
                continue
            if self._cancelled is not None:  # (a consumer still reading was cut off)
                raise StreamAborted(self._cancelled)
            if self._aborted is not None:
                raise StreamAborted(self._aborted, self._stack, self._name)
            if self._closed:
                return
            self._wake = asyncio.get_running_loop().create_future()
            await self._wake


class HostStreams:
    """The streams of one process, by id."""

    def __init__(self) -> None:
        self.sources: dict[str, Source] = {}
        self.pipes: dict[str, Pipe] = {}
        self._closing: set[asyncio.Task[None]] = set()

    # -- sources ---------------------------------------------------------------------

    def add_source(
        self,
        chunks: AsyncIterator[bytes],
        close: Callable[[], Awaitable[None]] | None = None,
        length: int | None = None,
    ) -> str:
        """Register bytes for JS to read; returns the id JS names them by."""
        self._sweep()
        sid = "s" + secrets.token_hex(8)
        self.sources[sid] = Source(chunks, close, length)
        return sid

    def take_source(self, sid: Any) -> Source:
        """Hand source `sid` to a host consumer: JS can no longer read it."""
        source = self.sources.pop(str(sid), None)
        if source is None:
            raise HostError("the body stream is no longer available", "TypeError")
        return source

    def discard_source(self, sid: str) -> None:
        """Close source `sid` if it is still registered (its request is over)."""
        source = self.sources.pop(sid, None)
        if source is not None:
            self._close_later(source)

    async def op_read(self, message: dict[str, Any]) -> Piece | None:
        """`stream.read`: the next piece of a source (base64 text in JS), None at its end."""
        sid = str(message.get("s"))
        source = self.sources.get(sid)
        if source is None:
            raise HostError("the body stream is no longer available", "TypeError")
        try:
            piece = await source.read()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - a failed read fails the JS stream
            self.sources.pop(sid, None)
            await source.aclose()
            if isinstance(error, HostError):
                raise
            detail = str(error) or type(error).__name__
            raise HostError(f"reading the body failed: {detail}", "TypeError") from None
        if piece is None:
            self.sources.pop(sid, None)
            return None
        return Piece(piece)

    def op_cancel(self, message: dict[str, Any]) -> None:
        """`stream.cancel`: JS no longer wants the rest of a source."""
        self.discard_source(str(message.get("s")))

    # -- pipes -----------------------------------------------------------------------

    def op_open(self, message: dict[str, Any]) -> None:
        """`pipe.open`: JS starts writing a body under an id of its choosing."""
        pid = message.get("p")
        if not isinstance(pid, str) or not pid or pid in self.pipes:
            raise HostError(f"celld: cannot open a body pipe named {pid!r}", "TypeError")
        self._sweep()
        self.pipes[pid] = Pipe()

    def op_write(self, message: dict[str, Any]) -> Later | None:
        """`pipe.write`: one piece (base64); answered when the pipe has room for more."""
        pipe = self._pipe(message)
        data = message.get("d")
        if not isinstance(data, str):
            raise HostError("celld: a body piece must be base64 text", "TypeError")
        return pipe.write(pybase64.b64decode(data, validate=True))

    def op_close(self, message: dict[str, Any]) -> None:
        """`pipe.close`: the body is complete."""
        pipe = self.pipes.get(str(message.get("p")))
        if pipe is not None:
            pipe.close()
            if not pipe.attached:
                return
            self.pipes.pop(str(message.get("p")), None)

    def op_abort(self, message: dict[str, Any]) -> None:
        """`pipe.abort`: the body failed (its stream errored); the consumer sees why."""
        pid = str(message.get("p"))
        pipe = self.pipes.get(pid)
        if pipe is None:
            return
        error = message.get("error") or {}
        name = str(error.get("name") or "Error")
        pipe.abort(f"{name}: {error.get('message', '')}", str(error.get("stack") or ""), name)
        if pipe.attached:
            self.pipes.pop(pid, None)

    def attach(self, pid: Any) -> Pipe:
        """The consumer of pipe `pid` (once)."""
        pipe = self.pipes.get(str(pid))
        if pipe is None or pipe.attached:
            raise HostError("the body stream is no longer available", "TypeError")
        pipe.attached = True
        if pipe.finished:
            self.pipes.pop(str(pid), None)
        return pipe

    def release_pipe(self, pid: str, reason: str | None = None) -> None:
        """The consumer of `pid` is done with it; `reason` says why it stopped early."""
        pipe = self.pipes.pop(pid, None)
        if pipe is not None and reason is not None:
            pipe.cancel(reason)

    def abort_pipe(self, pid: str, reason: str) -> bool:
        """Fail pipe `pid` for its consumer as its writer would (its isolate stopped, or
        will never write again); False when the writer had already finished it."""
        pipe = self.pipes.pop(pid, None)
        if pipe is None or pipe.finished:
            return False
        pipe.abort(reason)
        return True

    def _pipe(self, message: dict[str, Any]) -> Pipe:
        pipe = self.pipes.get(str(message.get("p")))
        if pipe is None:
            raise HostError("the body stream is no longer available", "TypeError")
        return pipe

    # -- consumers -------------------------------------------------------------------

    def body_of(self, spec: Any) -> tuple[AsyncIterator[bytes], int | None, Callable[[str], None]]:
        """A body JS handed to a host consumer, `{"pipe": id}` or `{"source": id}`: its
        chunks, its length when known, and how to stop it early (`stop(reason)`)."""
        if isinstance(spec, dict) and "pipe" in spec:
            pid = str(spec["pipe"])
            pipe = self.attach(pid)

            def stop(reason: str) -> None:
                pipe.cancel(reason)
                self.pipes.pop(pid, None)

            length = spec.get("length")
            return pipe.chunks(), length if isinstance(length, int) else None, stop
        if isinstance(spec, dict) and "source" in spec:
            source = self.take_source(spec["source"])

            def stop_source(reason: str) -> None:
                self._close_later(source)

            return source.chunks(), source.length, stop_source
        raise HostError("celld: a streamed body must name a pipe or a source", "TypeError")

    # -- upkeep ----------------------------------------------------------------------

    def _sweep(self) -> None:
        """Close what nobody has used for IDLE_S (an isolate died with it open)."""
        cutoff = time.monotonic() - IDLE_S
        for sid in [k for k, s in self.sources.items() if s.last_used < cutoff and not s.busy]:
            log.info("closing a body stream nobody read for %.0f s", IDLE_S)
            self._close_later(self.sources.pop(sid))
        # (An attached pipe is its consumer's to end: a slow client may be idle that long.)
        for pid in [k for k, p in self.pipes.items() if p.last_used < cutoff and not p.attached]:
            log.info("dropping a body pipe nobody took for %.0f s", IDLE_S)
            self.pipes.pop(pid).cancel("the stream was idle for too long")

    def _close_later(self, source: Source) -> None:
        if source.busy:
            source.close_after_read = True
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(source.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def ops(self) -> dict[str, OpHandler]:
        return {
            "stream.read": self.op_read,
            "stream.cancel": self.op_cancel,
            "pipe.open": self.op_open,
            "pipe.write": self.op_write,
            "pipe.close": self.op_close,
            "pipe.abort": self.op_abort,
        }


#: The process's streams: every isolate's messages name them by id.
STREAMS = HostStreams()


def stream_ops() -> dict[str, OpHandler]:
    return STREAMS.ops()
