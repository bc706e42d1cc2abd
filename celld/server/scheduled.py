"""Firing the Worker's scheduled() handler by hand, on `wrangler dev`'s routes.

* ``/cdn-cgi/handler/scheduled`` (and ``/cdn-cgi/local/scheduled``, its other name in
  `wrangler dev`), always served: query ``cron`` (default ``""``), ``time`` (the
  ``scheduledTime``, epoch ms; default now) and ``format=json``. It answers workerd's
  outcome, ``ok`` (200) or ``exception`` (500), as text or as
  ``{"outcome", "noRetry"}``. It is an operator route: beyond loopback it needs the
  operator token (celld.server.guard).
* ``/__scheduled?cron=...``, only with ``celld run --test-scheduled`` (it takes the path
  from the Worker, as `wrangler dev --test-scheduled` does): ``Ran scheduled event``
  (200), or the error's stack (500).

A handler that throws is logged like an uncaught error in a request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from celld.isolate.worker_pool import ScheduledOutcome, WorkerPool
from celld.server.request_log import log_request

log = logging.getLogger("celld.server")

HANDLER_PATHS = ("/cdn-cgi/handler/scheduled", "/cdn-cgi/local/scheduled")
TEST_PATH = "/__scheduled"
METHODS = ["GET", "POST"]


async def _fire(
    get_pool: Callable[[], WorkerPool], now: Callable[[], int], request: Request
) -> ScheduledOutcome | Response:
    params = request.query_params
    cron = params.get("cron", "")
    time_text = params.get("time")
    if time_text:
        try:
            scheduled_time = int(time_text)
        except ValueError:
            return PlainTextResponse(f"time must be epoch milliseconds, not {time_text!r}\n", 400)
    else:
        scheduled_time = now()
    outcome = await get_pool().scheduled(cron, scheduled_time)
    if outcome.error is not None:
        error = outcome.error
        log.error(
            "scheduled(%r): Uncaught %s: %s\n%s", cron, error.name, error.message, error.stack
        )
    return outcome


def scheduled_routes(get_pool: Callable[[], WorkerPool], now: Callable[[], int]) -> list[Route]:
    """The /cdn-cgi/ routes `wrangler dev` always serves."""

    async def handler(request: Request) -> Response:
        outcome = await _fire(get_pool, now, request)
        if isinstance(outcome, Response):
            return outcome
        status = 200 if outcome.outcome == "ok" else 500
        if request.query_params.get("format") == "json":
            body = {"outcome": outcome.outcome, "noRetry": outcome.no_retry}
            return JSONResponse(body, status_code=status)
        return PlainTextResponse(outcome.outcome, status_code=status)

    return [Route(path, handler, methods=METHODS) for path in HANDLER_PATHS]


def test_scheduled_routes(
    get_pool: Callable[[], WorkerPool], now: Callable[[], int]
) -> list[Route]:
    """``/__scheduled``, served before the Worker's own routes (--test-scheduled)."""

    async def handler(request: Request) -> Response:
        started = time.perf_counter()
        response = await answer(request)
        log_request(request.method, TEST_PATH, response.status_code, started)  # as the Worker's
        return response

    async def answer(request: Request) -> Response:
        outcome = await _fire(get_pool, now, request)
        if isinstance(outcome, Response):
            return outcome
        if outcome.error is not None:
            error = outcome.error
            text = error.stack or f"{error.name}: {error.message}"
            if not text.startswith(error.name):
                text = f"{error.name}: {error.message}\n{text}"
            return PlainTextResponse(text, status_code=500)
        return PlainTextResponse("Ran scheduled event")

    return [Route(TEST_PATH, handler, methods=METHODS)]
