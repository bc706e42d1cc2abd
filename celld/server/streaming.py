"""Sending a Worker's streamed response body to its client, at the client's pace.

The head goes out at once (as workerd sends it when the fetch handler returns); each piece
of the body is sent when it arrives from the isolate's pipe (celld/isolate/streams.py).
ASGI's `send` waits while the socket's buffer is full, and the pipe answers the isolate's
writes only while it has room, so a slow client slows the Worker's stream down instead of
filling the server's memory.

A client that goes away ends the request (the isolate's pulls, timers and fetches for it
stop). A body that fails after the head was sent (the Worker's stream errored, its isolate
stopped) cannot become an error status any more: the connection is closed without the
body's proper end, so the client sees an incomplete response, as with workerd.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from celld.isolate.streams import StreamAborted
from celld.isolate.worker_pool import WireResponse

log = logging.getLogger("celld.server")

CLIENT_GONE = "the client went away"


class ResponseAborted(Exception):  # noqa: N818 - raised to make the server drop the connection
    """Raised out of the app after the head was sent, so that the server closes the
    connection instead of ending the body properly. Logged by celld already, so the
    server's own traceback for it is filtered out."""


class _QuietAborts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, ResponseAborted)


logging.getLogger("uvicorn.error").addFilter(_QuietAborts())


class Receiver:
    """The request's ASGI `receive`, shared by the body reader and a streamed response's
    watch for the client going away: the watch receives itself only once the reader has
    seen the whole body (or when nothing reads it), so no body message is taken from it."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.body_done = False
        self.gone = False
        self._seen = asyncio.Event()

    async def __call__(self) -> Message:
        message = await self._receive()
        self._note(message)
        self._seen.set()
        return message

    def _note(self, message: Message) -> None:
        if message["type"] == "http.disconnect":
            self.gone = True
        elif not message.get("more_body", False):
            self.body_done = True

    async def wait_gone(self, body_read_elsewhere: bool) -> None:
        """Return once the client has disconnected. With `body_read_elsewhere` (the Worker
        streams the request body) this waits for the reader to finish the body first."""
        while not self.gone:
            if self.body_done or not body_read_elsewhere:
                self._note(await self._receive())  # body data nobody reads is dropped
                continue
            self._seen.clear()
            await self._seen.wait()


class StreamedResponse:
    """The ASGI response for a Worker response whose body streams."""

    def __init__(
        self,
        answer: WireResponse,
        receiver: Receiver,
        *,
        body_read_elsewhere: bool,
        label: str,
    ) -> None:
        assert answer.stream is not None
        self.answer = answer
        self.receiver = receiver
        self.body_read_elsewhere = body_read_elsewhere
        self.label = label  # "GET /path", for the log
        self._released = False

    @property
    def status_code(self) -> int:
        """The status its head carries (for the request log, as a Response's)."""
        return self.answer.status

    def _release(self, reason: str | None) -> None:
        if not self._released:
            self._released = True
            self.answer.release(reason)

    def _head(self) -> list[tuple[bytes, bytes]]:
        headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in self.answer.headers
            if k.lower() not in ("content-length", "transfer-encoding")
        ]
        if self.answer.length is not None:
            headers.append((b"content-length", str(self.answer.length).encode()))
        return headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = self.answer.stream
        assert stream is not None
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.answer.status,
                    "headers": self._head(),
                }
            )
            if scope.get("method") == "HEAD":
                self._release("a HEAD request gets no body")
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
        except BaseException:
            self._release(CLIENT_GONE)
            raise
        sending = asyncio.ensure_future(self._send_body(stream, send))
        watching = asyncio.ensure_future(self.receiver.wait_gone(self.body_read_elsewhere))
        try:
            await asyncio.wait({sending, watching}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the server is shutting down
            await _cancel(sending, watching)
            self._release("the server is shutting down")
            raise
        if not sending.done():
            await _cancel(sending)
            self._release(CLIENT_GONE)
            return
        await _cancel(watching)
        error = sending.exception()
        if error is None:
            self._release(None)
            return
        if isinstance(error, StreamAborted):
            stack = f"\n{error.stack}" if error.stack else ""
            log.error("%s: the response body failed: %s%s", self.label, error, stack)
        else:
            log.error("%s: sending the response body failed", self.label, exc_info=error)
        self._release(str(error) or type(error).__name__)
        raise ResponseAborted(str(error)) from None

    @staticmethod
    async def _send_body(stream: Any, send: Send) -> None:
        try:
            async for chunk in stream:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            await stream.aclose()  # now, not whenever the generator is collected
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel(*tasks: asyncio.Future[Any]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
