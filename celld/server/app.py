"""The Starlette app: every request goes to the Worker's fetch handler.

celld's own endpoints live under /cdn-cgi/celld/, a prefix Workers cannot be
routed to on Cloudflare either, so they never shadow a Worker's routes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Match, NoMatchFound, Route
from starlette.types import Receive, Scope, Send

from celld.bindings.assets import AssetServer
from celld.isolate.websockets import SocketHub
from celld.isolate.worker_pool import WorkerError, WorkerPool
from celld.server.limits import (
    INLINE_BODY_BYTES,
    MAX_BODY_BYTES,
    BodyReader,
    BodyTimeout,
    BodyTooLarge,
    ClientGone,
    response_problem,
)
from celld.server.request_log import log_request
from celld.server.streaming import Receiver, StreamedResponse
from celld.server.websocket import socket_app

log = logging.getLogger("celld.server")

INTERNAL_PREFIX = "/cdn-cgi/celld"


class WorkerRoute(Route):
    """The Worker's route: every path, even one whose decoded form holds a line break
    (``/a%0d%0ab``), which Starlette's ``{path:path}`` pattern does not match; the Worker
    gets such a path spelled as sent, as workerd passes it on."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or not scope["path"].startswith("/"):
            return Match.NONE, {}
        child = {"endpoint": self.endpoint, "path_params": {"path": scope["path"][1:]}}
        if self.methods and scope["method"] not in self.methods:
            return Match.PARTIAL, child
        return Match.FULL, child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The endpoint called as it is, without Starlette's per-request wrapping for
        exception handlers (its endpoint raises no HTTPException; anything else goes up to
        ServerErrorMiddleware either way): ~10 us of the loop's time a request."""
        if self.methods and scope["method"] not in self.methods:
            await super().handle(scope, receive, send)
            return
        response = await self.endpoint(Request(scope, receive, send))
        await response(scope, receive, send)


class WorkerFirst(WorkerRoute):
    """The Worker's route, tried before celld's own: a path outside /cdn-cgi/ is always
    the Worker's, so its requests skip matching every internal route's pattern in turn
    (tens of microseconds of the event loop's time a request). Paths under /cdn-cgi/ are
    left to the routes after it."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and not scope["path"].startswith("/cdn-cgi/"):
            return super().matches(scope)
        return Match.NONE, {}


class WorkerSocketRoute(BaseRoute):
    """WebSocket upgrades: every path goes to the Worker (celld/server/websocket.py)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "websocket" and not scope["path"].startswith(INTERNAL_PREFIX):
            return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: object) -> object:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


#: scheme://authority for the (scheme, Host header, server address) requests came with:
#: building it through Starlette's URL costs ~25 us of the loop's time a request, and a
#: server sees few of them (bounded: past `_ORIGINS_MAX` new ones are built each time)
_ORIGINS: dict[tuple[str, bytes | None, Any], str] = {}
_ORIGINS_MAX = 256


def _origin(scope: Scope) -> str:
    """``scheme://authority`` as Starlette's ``request.url`` spells it ("" when the request
    names no host and the server no address)."""
    host = None
    for name, value in scope["headers"]:
        if name == b"host":
            host = value
            break
    key = (scope.get("scheme", "http"), host, scope.get("server"))
    origin = _ORIGINS.get(key)
    if origin is None:
        bare = {**scope, "path": "/", "query_string": b"", "root_path": ""}
        url = str(URL(scope=bare))
        origin = url[:-1] if url.endswith("/") else ""
        if len(_ORIGINS) < _ORIGINS_MAX:
            _ORIGINS[key] = origin
    return origin


def worker_url(request: Request) -> str:
    """The URL the Worker sees, its path and query spelled as the client sent them (as workerd
    passes them on). Starlette's ``request.url`` holds the decoded path: ``%00`` or ``%01`` in
    it became a control character the Worker's URL parser drops, ``%ff`` a replacement
    character, ``%2F`` a slash."""
    scope = request.scope
    raw = scope.get("raw_path")
    if not raw or not raw.startswith(b"/"):
        return str(request.url)
    query = scope.get("query_string", b"")
    spelled = _origin(scope) + raw.decode("latin-1")
    return spelled + ("?" + query.decode("latin-1") if query else "")


def _too_large() -> Response:
    return PlainTextResponse(
        f"Payload Too Large: request bodies are limited to {MAX_BODY_BYTES} bytes\n",
        status_code=413,
    )


def _body_failed(error: Exception) -> Response:
    """The answer when reading the request body failed, whatever the Worker made of it."""
    if isinstance(error, BodyTooLarge):
        return _too_large()
    if isinstance(error, BodyTimeout):
        return PlainTextResponse(f"Request Timeout: {error}\n", status_code=408)
    return PlainTextResponse(f"Bad Request: {error}\n", status_code=400)


def _rewritten(
    url: str, headers: list[tuple[str, str]], scheme: str | None, host: str | None
) -> tuple[str, list[tuple[str, str]]]:
    """The URL and headers the Worker sees under [dev] upstream_protocol / host. `url` is
    `worker_url`'s: only its scheme and host change, its path and query stay as sent."""
    current_scheme, rest = url.split("://", 1)
    slash = rest.find("/")
    netloc, tail = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if scheme is not None:
        current_scheme = scheme
    if host is not None:
        netloc = host
        headers = [(k, host if k.lower() == "host" else v) for k, v in headers]
    return f"{current_scheme}://{netloc}{tail}", headers


def build_app(
    get_pool: Callable[[], WorkerPool],
    *,
    startup: Callable[[], Awaitable[None]],
    shutdown: Callable[[], Awaitable[None]],
    metrics: Callable[[], Awaitable[str]] | None = None,
    internal_routes: list[Route] | None = None,
    assets: Callable[[], AssetServer | None] | None = None,
    before_worker: list[Route] | None = None,
    url_rewrite: tuple[str | None, str | None] | None = None,
    sockets: Callable[[], SocketHub | None] | None = None,
) -> Starlette:
    """The app. `before_worker` routes take their paths from the Worker (`/__scheduled`
    with --test-scheduled); `url_rewrite` is ([dev] upstream_protocol, [dev] host): what
    the Worker's request.url says instead of the URL it was called with. `get_pool` and
    `assets` are asked on each request: a reload on change replaces them."""

    async def serve_worker(request: Request) -> Response:
        static = assets() if assets is not None else None
        if static is not None:
            # The path as sent (not re-quoted), so needless escapes can be redirected away.
            raw_path = request.scope.get("raw_path") or request.url.path.encode()
            query = request.url.query
            target = raw_path.decode("latin-1") + (f"?{query}" if query else "")
            found = await static.answer(
                request.method,
                target,
                {k.lower(): v for k, v in request.headers.items()},
                from_worker=False,
            )
            if found is not None:
                response = Response(content=found.body, status_code=found.status)
                response.raw_headers = [
                    (k.encode("latin-1"), v.encode("latin-1")) for k, v in found.headers
                ] + [(b"content-length", str(found.content_length).encode())]
                return response
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        url = worker_url(request)
        if url_rewrite is not None:
            url, headers = _rewritten(url, headers, *url_rewrite)
        declared = request.headers.get("content-length")
        if declared is not None and not declared.isdigit():
            return PlainTextResponse("Invalid Content-Length\n", status_code=400)
        if declared is not None and int(declared) > MAX_BODY_BYTES:
            return _too_large()
        receiver = Receiver(request.receive)
        reader = BodyReader(receiver)
        body: bytes | AsyncIterator[bytes]
        try:
            if request.method in ("GET", "HEAD"):
                body = b""
            elif declared is not None and int(declared) <= INLINE_BODY_BYTES:
                body = await reader.read_all()
            else:
                body = reader.stream()
            answer = await get_pool().handle(request.method, url, headers, body)
        except WorkerError as error:
            if reader.failure is not None:
                return _body_failed(reader.failure)
            log.error(
                "%s %s: Uncaught %s: %s\n%s",
                request.method,
                request.url.path,
                error.name,
                error.message,
                error.stack,
            )
            return PlainTextResponse(
                f"Worker threw exception: {error.name}: {error.message}\n", status_code=500
            )
        except (BodyTooLarge, BodyTimeout, ClientGone) as error:
            return _body_failed(error)
        except asyncio.CancelledError:
            # The shutdown grace period (SIGTERM, --grace) is over: answer instead of
            # leaving the client with a dropped connection and the log with a traceback.
            log.warning("%s %s: cut off by shutdown", request.method, request.url.path)
            return PlainTextResponse(
                "Service Unavailable: celld is shutting down\n", status_code=503
            )
        if reader.failure is not None:
            answer.release(str(reader.failure))
            return _body_failed(reader.failure)
        problem = response_problem(answer.status, answer.headers)
        if problem is not None:
            answer.release(problem)
            log.error("%s %s: %s", request.method, request.url.path, problem)
            return PlainTextResponse(f"Worker threw exception: TypeError: {problem}\n", 500)
        if answer.stream is not None:
            return StreamedResponse(  # type: ignore[return-value] - an ASGI app, as Starlette allows
                answer,
                receiver,
                body_read_elsewhere=not isinstance(body, bytes),
                label=f"{request.method} {request.url.path}",
            )
        answer.release(None)
        response = Response(content=answer.body, status_code=answer.status)
        response.raw_headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in answer.headers
            if k.lower() != "content-length"
        ] + [(b"content-length", str(len(answer.body)).encode())]
        return response

    async def serve_and_log(request: Request) -> Response:
        """The Worker's answer, and its line in the request log."""
        started = time.perf_counter()
        response = await serve_worker(request)
        status = response.status_code  # a streamed response's too: its head is ready
        log_request(request.method, request.scope["path"], status, started)
        return response

    async def serve_metrics(request: Request) -> Response:
        text = await metrics() if metrics is not None else ""
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await startup()
        try:
            yield
        finally:
            await shutdown()

    methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        *(before_worker or []),
        WorkerFirst("/{path:path}", serve_and_log, methods=methods),
        Route(f"{INTERNAL_PREFIX}/health", health, methods=["GET"]),
        Route(f"{INTERNAL_PREFIX}/metrics", serve_metrics, methods=["GET"]),
        *(internal_routes or []),
        WorkerRoute("/{path:path}", serve_and_log, methods=methods),
        WorkerSocketRoute(socket_app(get_pool, sockets or (lambda: None))),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
