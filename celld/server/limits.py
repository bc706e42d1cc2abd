"""HTTP limits: request body size and read timeouts, and what a Worker may answer.

Request bodies up to `INLINE_BODY_BYTES` with a declared length are read whole (one
message to the Worker); anything larger, or of unknown length, is streamed: the
Worker pulls it chunk by chunk as it reads, so celld never holds a large body whole.
The limit is Cloudflare's on the Free and Pro plans (100 MB): a declared length over
it is refused with 413 before the Worker runs, and a streamed body that grows past it
fails the Worker's read and gets 413 too.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.types import Receive

#: Cloudflare's maximum request body size on the Free and Pro plans.
MAX_BODY_BYTES = 100 * 1024 * 1024
#: Bodies of at most this size (with a Content-Length) go to the Worker in one message.
INLINE_BODY_BYTES = 64 * 1024
#: A client that sends no body bytes for this long (s) is cut off with 408.
BODY_READ_TIMEOUT_S = 30.0

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00\r\n]")


class BodyTooLarge(ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")


class BodyTimeout(TimeoutError):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the client sent no body data for {seconds:g} s")


class ClientGone(OSError):
    def __init__(self) -> None:
        super().__init__("the client disconnected")


@dataclass
class BodyReader:
    """Reads a request body from ASGI `receive`, enforcing the size limit and timeout.
    `failure` records why reading stopped early, so the server can answer 413/408
    whatever the Worker made of the failed read."""

    receive: Receive
    limit: int = MAX_BODY_BYTES
    timeout: float = BODY_READ_TIMEOUT_S
    received: int = 0
    done: bool = False
    failure: Exception | None = None

    async def chunk(self) -> bytes | None:
        """The next non-empty chunk, or None at the end of the body."""
        while not self.done:
            try:
                # (a timeout around the await, not wait_for: that runs `receive` as a task
                # of its own, ~3 passes of the loop and 3x the CPU for a body already read)
                async with asyncio.timeout(self.timeout):
                    message = await self.receive()
            except TimeoutError:
                raise self._fail(BodyTimeout(self.timeout)) from None
            if message["type"] == "http.disconnect":
                raise self._fail(ClientGone())
            data = message.get("body", b"")
            self.done = not message.get("more_body", False)
            self.received += len(data)
            if self.received > self.limit:
                raise self._fail(BodyTooLarge(self.limit))
            if data:
                return bytes(data)
        return None

    def _fail(self, error: Exception) -> Exception:
        self.failure = error
        self.done = True
        return error

    async def read_all(self) -> bytes:
        parts: list[bytes] = []
        while (part := await self.chunk()) is not None:
            parts.append(part)
        return b"".join(parts)

    async def stream(self) -> AsyncIterator[bytes]:
        while (part := await self.chunk()) is not None:
            yield part


def response_problem(status: int, headers: list[tuple[str, str]]) -> str | None:
    """Why a Worker's response cannot be sent over HTTP/1.1 (None: it can)."""
    if status == 0:
        return "the Worker returned Response.error(), a network error, not a response"
    if not 200 <= status <= 599:
        return f"the Worker returned status {status}, which celld cannot send"
    for name, value in headers:
        if not _TOKEN.fullmatch(name):
            return f"the Worker returned an invalid header name {name!r}"
        if _BAD_VALUE.search(value):
            return f"the Worker returned an invalid value for header {name!r}"
        try:
            name.encode("latin-1")
            value.encode("latin-1")
        except UnicodeEncodeError:
            return f"the Worker returned header {name!r} with characters HTTP cannot carry"
    return None
