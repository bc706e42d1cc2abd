"""Requests whose bytes cannot make a URL get a 400 before anything routes them.

Why: the HTTP parser (h11) already refuses what HTTP/1.1 forbids outright (control characters
in header values, bytes over 0x7f in the request target, malformed chunking) with its own 400,
but it lets through a ``Host`` header that no URL can hold (``[``, ``x:99999999``, ``a b``).
Every part of celld then builds a URL from it (the Worker's ``request.url``, the operator
guard's loopback check), and a parser that raises halfway through a request answers 500 with
a traceback in the log. One check here answers ``400 Bad Request: invalid Host header``
instead, for the Worker's routes, the assets and the operator API alike.

Everything else a client may send stays the Worker's to judge, as workerd passes it on: a
path with ``%00``, ``%ff`` or ``%zz`` reaches the Worker spelled as it was sent (see
celld/server/app.py), and the assets treat a name no file can have as no file.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

Scope = dict[str, Any]


@lru_cache(maxsize=256)
def valid_host(host: str) -> bool:
    """Whether `host` can be the authority of a URL (name or address, optional port).
    Remembered: every request asks it, nearly always of the same few Host headers, and
    parsing one costs ~15 us of the event loop's time."""
    if not host or any(c.isspace() or ord(c) < 0x20 or c in "/?#@\\" for c in host):
        return False
    try:
        parts = urlsplit(f"//{host}")
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        return False
    return parts.hostname is not None


class RequestShape:
    """ASGI middleware: a request with an unusable Host header gets 400."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"host" and not valid_host(value.decode("latin-1")):
                    await _bad_request(send, "invalid Host header")
                    return
        await self.app(scope, receive, send)


async def _bad_request(send: Any, reason: str) -> None:
    body = f"Bad Request: {reason}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
