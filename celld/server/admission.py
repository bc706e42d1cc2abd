"""The cap on requests served at once (`--max-connections`).

A request counts from the moment its headers have been read until its response is sent
(or the client is gone); a connection without such a request counts for nothing here
(celld/server/connections.py keeps those). Past the cap a request gets 503 at once, so a
client learns the server is full instead of waiting in a queue of unknown length.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("celld.server")

#: Default for `--max-connections`.
MAX_REQUESTS_IN_FLIGHT = 1024
#: At most one log line a minute about refused requests.
LOG_EVERY_S = 60.0


class RequestCap:
    """ASGI middleware: at most `limit` HTTP requests in flight; 503 beyond."""

    def __init__(self, app: ASGIApp, limit: int = MAX_REQUESTS_IN_FLIGHT) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0
        self.refused = 0
        self._logged_at = float("-inf")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            await self._refuse(send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _refuse(self, send: Send) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            log.warning(
                "%d request(s) in flight, the limit (--max-connections): answering 503 "
                "(%d refused so far)",
                self.in_flight,
                self.refused,
            )
        body = b"Service Unavailable: too many requests in flight\n"
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", b"1"),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
