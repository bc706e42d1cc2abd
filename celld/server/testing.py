"""Test helpers over HTTP, usable from any test runner (and from celld.client).

* `POST /cdn-cgi/celld/clock?advance=MS` moves the manual test clock (celld started
  with `CELLD_TEST_CLOCK=manual`); `GET` reads it.
* `GET /cdn-cgi/celld/api/workflows/{wf}/instances/{id}/wait-for-status?status=S&timeout_ms=T`
  answers once the instance has status S (408 after T ms of real time, 409 when it
  ended with another status).
* `GET .../wait-for-step-result?name=N&count=1&type=do&timeout_ms=T` answers with the
  step's output once it has one (409 if the step failed).
* `GET .../wait-until-settled?timeout_ms=T` answers with the instance's details once it
  waits on nothing already due (final, paused, or its next deadline after the engine's
  now): after moving the clock, the moment everything the move made due has happened.

Waiting happens in celld, so a test makes one request instead of a polling loop.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from celld.server.explorer import envelope, guarded, instance_id, int_param
from celld.server.operator import Operator, OperatorError

API_PREFIX = "/cdn-cgi/celld/api"
DEFAULT_TIMEOUT_MS = 10_000


def testing_routes(operator: Operator) -> list[Route]:
    async def wait_for_status(request: Request) -> Response:
        wanted = request.query_params.get("status")
        if not wanted:
            raise OperatorError(400, "status is required")
        view = await operator.wait_for_status(
            request.path_params["workflow"],
            await instance_id(operator, request),
            wanted,
            int_param(request, "timeout_ms", DEFAULT_TIMEOUT_MS),
        )
        return envelope(view)

    async def wait_for_step_result(request: Request) -> Response:
        name = request.query_params.get("name")
        if not name:
            raise OperatorError(400, "name (the step's name) is required")
        step_type = request.query_params.get("type", "do")
        if step_type not in ("do", "waitForEvent"):
            raise OperatorError(400, "type must be do or waitForEvent")
        result = await operator.wait_for_step_result(
            request.path_params["workflow"],
            await instance_id(operator, request),
            name,
            count=int_param(request, "count", 1),
            step_type=step_type,
            timeout_ms=int_param(request, "timeout_ms", DEFAULT_TIMEOUT_MS),
        )
        return envelope(result)

    async def wait_until_settled(request: Request) -> Response:
        details = await operator.wait_until_settled(
            request.path_params["workflow"],
            await instance_id(operator, request),
            int_param(request, "timeout_ms", DEFAULT_TIMEOUT_MS),
        )
        return envelope(details)

    one = f"{API_PREFIX}/workflows/{{workflow}}/instances/{{instance}}"
    return [
        Route(f"{one}/wait-for-status", guarded(wait_for_status), methods=["GET"]),
        Route(f"{one}/wait-for-step-result", guarded(wait_for_step_result), methods=["GET"]),
        Route(f"{one}/wait-until-settled", guarded(wait_until_settled), methods=["GET"]),
    ]
