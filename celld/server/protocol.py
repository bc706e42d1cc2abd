"""uvicorn's HTTP/1.1 protocol with a deadline for request headers.

uvicorn times out idle keep-alive connections, but any byte that arrives cancels that
timer, so a client that sends its headers one byte at a time (or opens a connection
and sends nothing) holds the connection, and a slot of the connection cap, for ever.
Here a connection waiting for request headers, new or between two requests, has
`HEADER_TIMEOUT_S` to complete them, then it is closed. Body reads have their own
timeout (celld.server.limits).
"""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("celld.server")

#: Seconds a client has to send a request's headers.
HEADER_TIMEOUT_S = 10.0


class GuardedH11Protocol(H11Protocol):
    header_timeout = HEADER_TIMEOUT_S
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_headers()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _watch_headers(self) -> None:
        """Armed while the peer owes us request headers it has started to send."""
        partial, _ = self.conn.trailing_data
        if self.conn.their_state is h11.IDLE and partial:
            self._arm_header_timer()
        elif self.conn.their_state is not h11.IDLE:
            self._cancel_header_timer()

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("closing a connection that sent no complete request headers in time")
            self.transport.close()


def guarded_protocol(header_timeout: float) -> type[GuardedH11Protocol]:
    """The protocol class with `header_timeout` seconds for request headers."""
    return type("CelldH11Protocol", (GuardedH11Protocol,), {"header_timeout": header_timeout})
