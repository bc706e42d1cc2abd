"""Who may use the operator surface (explorer API, celld's API and page, metrics, clock,
firing the Worker's scheduled() handler).

* Bound to a loopback address (the default), no token is needed, but a request must
  name a loopback host (a web page that rebinds its own DNS name to 127.0.0.1 is
  refused), and a state-changing request from a browser must come from the same origin
  (another site's page cannot POST to it).
* With a token (`CELLD_ADMIN_TOKEN`, or one `celld run --ip` prints when it binds another
  address), every operator request must carry it: `Authorization: Bearer T`, the
  `X-Celld-Token` header, or the cookie the page sets after `/cdn-cgi/celld/?token=T`.

The Worker's own routes are never checked here. A plain ASGI middleware rather than
Starlette's BaseHTTPMiddleware: Worker requests pass through with one prefix test.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

PROTECTED = (
    "/cdn-cgi/celld",
    "/cdn-cgi/local/explorer",
    "/cdn-cgi/handler/scheduled",  # runs the Worker's scheduled() (celld.server.scheduled)
    "/cdn-cgi/local/scheduled",
)
OPEN = ("/cdn-cgi/celld/health",)
PAGE = "/cdn-cgi/celld/"
COOKIE = "celld_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Scope = dict[str, Any]


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    try:
        return urlsplit(f"//{host_header}").hostname or ""
    except ValueError:  # no URL can hold it ("[", a bad port): not loopback
        return ""


def _cross_origin(origin: str | None, host: str) -> bool:
    if origin is None:
        return False
    try:
        return urlsplit(origin).netloc.lower() != host.lower()
    except ValueError:  # an Origin no URL can hold is nobody's own origin
        return True


class OperatorGuard:
    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if not path.startswith(PROTECTED) or path in OPEN:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        method = scope["method"]
        origin = headers.get("origin")
        cross_origin = _cross_origin(origin, host)
        if method not in SAFE_METHODS and cross_origin:
            await _deny(send, 403, "cross-origin requests to the operator API are refused")
            return
        if self.token is None:
            if not is_loopback(_host_name(host)):
                message = f"operator routes answer only to a loopback host, not {host!r}"
                await _deny(send, 403, message)
                return
            await self.app(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = query.get("token", [None])[0]
        if path == PAGE and given is not None and self._matches(given):
            await _set_cookie(send, given, scope.get("scheme") == "https")
            return
        if self._matches(self._presented(headers)):
            await self.app(scope, receive, send)
            return
        await _deny(
            send,
            401,
            "this celld listens beyond loopback: operator requests need its token "
            "(Authorization: Bearer <token>, or open /cdn-cgi/celld/?token=<token>)",
        )

    def _presented(self, headers: dict[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        if "x-celld-token" in headers:
            return headers["x-celld-token"]
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie header presents no token
            return None
        morsel = cookie.get(COOKIE)
        return morsel.value if morsel is not None else None

    def _matches(self, presented: str | None) -> bool:
        assert self.token is not None
        return presented is not None and hmac.compare_digest(
            presented.encode(), self.token.encode()
        )


async def _deny(send: Any, status: int, message: str) -> None:
    body = json.dumps(
        {"success": False, "errors": [{"code": 10000, "message": message}], "messages": [],
         "result": None}
    ).encode()  # fmt: skip
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _set_cookie(send: Any, token: str, secure: bool) -> None:
    flags = "; Secure" if secure else ""
    cookie = f"{COOKIE}={token}; Path=/cdn-cgi; HttpOnly; SameSite=Strict{flags}"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", PAGE.encode()),
                (b"set-cookie", cookie.encode("latin-1")),
                (b"content-length", b"0"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
