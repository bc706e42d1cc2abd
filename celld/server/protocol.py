"""uvicorn's HTTP/1.1 protocol (httptools) with a deadline for request headers.

uvicorn times out idle keep-alive connections, but any byte that arrives cancels that
timer, so a client that sends its headers one byte at a time (or opens a connection
and sends nothing) holds the connection, and a slot of the connection cap, for ever.
Here a connection waiting for request headers, new or between two requests, has
`HEADER_TIMEOUT_S` to complete them, then it is closed. Body reads have their own
timeout (celld.server.limits).

The parser is httptools (llhttp, in C) rather than h11: h11 parses in Python on the event
loop's thread, about 150 us of its CPU per request here (bench/PROFILE.md).
"""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from celld.isolate.inline import inline_turns

log = logging.getLogger("celld.server")

#: Seconds a client has to send a request's headers.
HEADER_TIMEOUT_S = 10.0


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    header_timeout = HEADER_TIMEOUT_S
    _header_timer: asyncio.TimerHandle | None = None
    #: True from the connection's start, and from a request's first byte, until that
    #: request's headers are complete.
    _awaiting_headers = True

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._awaiting_headers = True
        self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_headers = True
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._cancel_header_timer()
        super().on_headers_complete()
        # The request's task starts in the loop's next pass: workflow slices due meanwhile
        # wait for it (celld/isolate/inline.py), and a Worker turn it starts holds them on.
        turns = inline_turns()
        turns.hold()
        self.loop.call_soon(turns.release)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._awaiting_headers and not self.transport.is_closing():
            log.info("closing a connection that sent no complete request headers in time")
            self.transport.close()


def guarded_protocol(header_timeout: float) -> type[GuardedHttpToolsProtocol]:
    """The protocol class with `header_timeout` seconds for request headers."""
    return type(
        "CelldHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"header_timeout": header_timeout}
    )
