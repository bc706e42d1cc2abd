"""The Starlette app: every request goes to the Worker's fetch handler.

celld's own endpoints live under /cdn-cgi/celld/, a prefix Workers cannot be
routed to on Cloudflare either, so they never shadow a Worker's routes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from celld.isolate.worker_pool import WorkerError, WorkerPool

log = logging.getLogger("celld.server")

INTERNAL_PREFIX = "/cdn-cgi/celld"


def build_app(
    get_pool: Callable[[], WorkerPool],
    *,
    startup: Callable[[], Awaitable[None]],
    shutdown: Callable[[], Awaitable[None]],
    metrics: Callable[[], Awaitable[str]] | None = None,
    internal_routes: list[Route] | None = None,
) -> Starlette:
    async def serve_worker(request: Request) -> Response:
        body = await request.body()
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        try:
            answer = await get_pool().handle(request.method, str(request.url), headers, body)
        except WorkerError as error:
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
        response = Response(content=answer.body, status_code=answer.status)
        response.raw_headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in answer.headers
            if k.lower() != "content-length"
        ] + [(b"content-length", str(len(answer.body)).encode())]
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
        Route(f"{INTERNAL_PREFIX}/health", health, methods=["GET"]),
        Route(f"{INTERNAL_PREFIX}/metrics", serve_metrics, methods=["GET"]),
        *(internal_routes or []),
        Route("/{path:path}", serve_worker, methods=methods),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
