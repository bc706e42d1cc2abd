"""Test helpers over HTTP, usable from any test runner (and from celld.client).

* `POST /cdn-cgi/celld/clock?advance=MS` moves the manual test clock (celld started
  with `CELLD_TEST_CLOCK=manual`); `GET` reads it. The clock and the modifiers below are
  this node's: on a store shared by several nodes the others keep their own.
* `GET /cdn-cgi/celld/api/workflows/{wf}/instances/{id}/wait-for-status?status=S&timeout_ms=T`
  answers once the instance has status S (408 after T ms of real time, 409 when it
  ended with another status).
* `GET .../wait-for-step-result?name=N&count=1&type=do&timeout_ms=T` answers with the
  step's output once it has one (409 if the step failed).
* `GET .../wait-until-settled?timeout_ms=T` answers with the instance's details once it
  waits on nothing already due (final, paused, or its next deadline after the engine's
  now): after moving the clock, the moment everything the move made due has happened.

Waiting happens in celld, so a test makes one request instead of a polling loop.

Cloudflare's introspection operations (celld.server.introspect; test mode only), each
body `{"operations": [{"type": "mockStepResult", "step": {"name": N, "index": 1},
"stepResult": V}, ...]}` with the types disableSleeps, disableRetryDelays,
mockStepResult, mockStepError, forceStepTimeout, mockEvent, forceEventTimeout:

* `POST .../workflows/{wf}/instances/{id}/introspection` adds modifiers to one instance
  (before or after it is created); `GET` lists them; `DELETE` disposes: drops them and
  deletes the instance.
* `POST .../workflows/{wf}/introspection` starts a session whose operations every
  instance created from then on receives (409 while one is active); `POST
  .../introspection/modify` adds operations; `GET` shows them and the instances
  created; `DELETE` ends it and disposes of those instances.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from celld.cells.modifiers import Operation
from celld.server.explorer import envelope, guarded, instance_id, int_param, json_body
from celld.server.introspect import Introspector
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

    one = f"{API_PREFIX}/workflows/{{workflow}}/instances/{{instance:path}}"
    return [
        Route(f"{one}/wait-for-status", guarded(wait_for_status), methods=["GET"]),
        Route(f"{one}/wait-for-step-result", guarded(wait_for_step_result), methods=["GET"]),
        Route(f"{one}/wait-until-settled", guarded(wait_until_settled), methods=["GET"]),
        *introspection_routes(operator),
    ]


async def _operations(request: Request) -> list[Operation]:
    body = await json_body(request)
    if body is ...:
        body = {}
    if not isinstance(body, dict):
        raise OperatorError(400, "the body must be an object {operations: [...]}")
    return Introspector.operations(body.get("operations"))


def introspection_routes(operator: Operator) -> list[Route]:
    introspector = Introspector(operator)

    async def modify_instance(request: Request) -> Response:
        workflow = request.path_params["workflow"]
        operations = await _operations(request)
        view = await introspector.modify_instance(
            workflow, await instance_id(operator, request), operations
        )
        return envelope(view)

    async def instance_modifiers(request: Request) -> Response:
        workflow = request.path_params["workflow"]
        return envelope(introspector.instance_view(workflow, await instance_id(operator, request)))

    async def dispose_instance(request: Request) -> Response:
        workflow = request.path_params["workflow"]
        view = await introspector.dispose_instance(workflow, await instance_id(operator, request))
        return envelope(view)

    async def start_session(request: Request) -> Response:
        operations = await _operations(request)
        return envelope(introspector.start_session(request.path_params["workflow"], operations))

    async def modify_all(request: Request) -> Response:
        operations = await _operations(request)
        return envelope(introspector.modify_all(request.path_params["workflow"], operations))

    async def session(request: Request) -> Response:
        return envelope(introspector.session(request.path_params["workflow"]))

    async def dispose_session(request: Request) -> Response:
        return envelope(await introspector.dispose_session(request.path_params["workflow"]))

    wf = f"{API_PREFIX}/workflows/{{workflow}}/introspection"
    one = f"{API_PREFIX}/workflows/{{workflow}}/instances/{{instance:path}}/introspection"
    return [
        Route(one, guarded(modify_instance), methods=["POST"]),
        Route(one, guarded(instance_modifiers), methods=["GET"]),
        Route(one, guarded(dispose_instance), methods=["DELETE"]),
        Route(wf, guarded(start_session), methods=["POST"]),
        Route(f"{wf}/modify", guarded(modify_all), methods=["POST"]),
        Route(wf, guarded(session), methods=["GET"]),
        Route(wf, guarded(dispose_session), methods=["DELETE"]),
    ]
