"""The local explorer API at /cdn-cgi/local/explorer/api, the one `wrangler dev` serves.

`wrangler workflows ... --local --port P` speaks it, so it works against `celld run`
unchanged and prints what it prints against `wrangler dev` (celld.server.explorer_shape:
the same fields, step names as `<name>-<count>`). Answers use Cloudflare's API envelope
(`{success, errors, messages, result}`); failures carry a 4xx/5xx status and an
`errors[0].message` that wrangler prints as is. celld's own tools (its CLI, the client,
the page) send `X-Celld-Details: 1` and get celld's fuller answers: steps by name with
their counts and kinds, deadlines, events, rollback progress, versions.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from celld.server import explorer_shape as shape
from celld.server.operator import CODE_INVALID, Operator, OperatorError
from celld.store.base import StoreUnavailable

EXPLORER_PREFIX = "/cdn-cgi/local/explorer/api"
MAX_BODY = 2 * 1024 * 1024

Handler = Callable[[Request], Awaitable[Response]]


def envelope(result: Any, **extra: Any) -> JSONResponse:
    return JSONResponse({"success": True, "errors": [], "messages": [], "result": result, **extra})


def failure(status: int, message: str, code: int = CODE_INVALID) -> JSONResponse:
    body = {"success": False, "errors": [{"code": code, "message": message}], "messages": []}
    return JSONResponse({**body, "result": None}, status_code=status)


def guarded(handler: Handler) -> Handler:
    """Turn OperatorError (and bad JSON) into the envelope's error form."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except OperatorError as error:
            return failure(error.status, error.message, error.code)
        except StoreUnavailable as error:  # transient: the caller may try again
            return failure(503, f"the store is unavailable: {error}")

    return run


async def json_body(request: Request, *, required: bool = False) -> Any:
    """The request's JSON body; ... when it is empty and not required."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise OperatorError(413, f"request body is larger than {MAX_BODY} bytes")
    if not raw.strip():
        if required:
            raise OperatorError(400, "a JSON body is required")
        return ...
    try:
        return json.loads(raw)
    except ValueError as error:
        raise OperatorError(400, f"the body is not valid JSON: {error}") from None


def int_param(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise OperatorError(400, f"{name} must be a whole number, not {text!r}") from None


async def instance_id(operator: Operator, request: Request) -> str:
    """The id in the path; `latest` means the newest instance (as wrangler's CLI says)."""
    value = request.path_params["instance"]
    if value == "latest":
        return await operator.latest_id(request.path_params["workflow"])
    return str(value)


def explorer_routes(operator: Operator) -> list[Route]:
    async def list_workflows(request: Request) -> Response:
        workflows = operator.list_workflows()
        return envelope(workflows, result_info={"count": len(workflows)})

    async def workflow_details(request: Request) -> Response:
        details = await operator.workflow_details(request.path_params["workflow"])
        return envelope(details if shape.wants_details(request) else shape.workflow(details))

    async def delete_workflow(request: Request) -> Response:
        return envelope(await operator.delete_all(request.path_params["workflow"]))

    async def list_instances(request: Request) -> Response:
        params = request.query_params
        items, info = await operator.list_instances(
            request.path_params["workflow"],
            page=int_param(request, "page", 1),
            per_page=int_param(request, "per_page", 25),
            status=params.get("status") or None,
            date_start=params.get("date_start") or None,
            date_end=params.get("date_end") or None,
            search=params.get("search") or None,  # celld's: ids containing it
        )
        if not shape.wants_details(request):
            items = [shape.instance_item(item) for item in items]
            info = shape.result_info(info)
        return envelope(items, result_info=info)

    async def create_instance(request: Request) -> Response:
        body = await json_body(request)
        if body is ...:
            body = {}
        if not isinstance(body, dict):
            raise OperatorError(400, "the body must be an object {id?, params?}")
        created = await operator.create(
            request.path_params["workflow"], body.get("id"), body.get("params")
        )
        return envelope({"id": created})

    async def describe_instance(request: Request) -> Response:
        workflow = request.path_params["workflow"]
        details = await operator.describe(workflow, await instance_id(operator, request))
        return envelope(details if shape.wants_details(request) else shape.instance(details))

    async def change_status(request: Request) -> Response:
        body = await json_body(request, required=True)
        if not isinstance(body, dict):
            raise OperatorError(400, "the body must be an object {status, from?}")
        # wrangler's CLI sends {status}; the explorer page of some versions sends {action}
        action = body.get("status", body.get("action"))
        rollback = body.get("rollback")
        if rollback is not None and action != "terminate":
            raise OperatorError(400, "'rollback' is only valid when terminating.")
        if rollback is not None and not isinstance(rollback, bool):
            raise OperatorError(400, "rollback must be true or false")
        workflow = request.path_params["workflow"]
        result = await operator.change_status(
            workflow,
            await instance_id(operator, request),
            action,
            body.get("from"),
            rollback=rollback is True,
        )
        return envelope(result if shape.wants_details(request) else shape.status_change(result))

    async def send_event(request: Request) -> Response:
        payload = await json_body(request)
        workflow = request.path_params["workflow"]
        await operator.send_event(
            workflow,
            await instance_id(operator, request),
            request.path_params["event_type"],
            payload,
        )
        return envelope({"success": True})

    async def delete_instance(request: Request) -> Response:
        workflow = request.path_params["workflow"]
        await operator.delete(workflow, await instance_id(operator, request))
        return envelope({"success": True})

    async def delete_batch(request: Request) -> Response:
        body = await json_body(request, required=True)
        if not isinstance(body, dict):
            raise OperatorError(400, "the body must be an object {instances: [ids]}")
        workflow = request.path_params["workflow"]
        return envelope(await operator.delete_batch(workflow, body.get("instances")))

    wf = f"{EXPLORER_PREFIX}/workflows/{{workflow}}"
    # ids of instances a cron schedule started may hold a "/" (`*/5 * * * *-<ms>`), which
    # arrives decoded: the id may span segments, so the longer routes come first
    one = f"{wf}/instances/{{instance:path}}"
    table: list[tuple[str, Handler, list[str]]] = [
        (f"{EXPLORER_PREFIX}/workflows", list_workflows, ["GET"]),
        (wf, workflow_details, ["GET"]),
        (wf, delete_workflow, ["DELETE"]),
        (f"{wf}/instances", list_instances, ["GET"]),
        (f"{wf}/instances", create_instance, ["POST"]),
        (f"{wf}/instances/batch/delete", delete_batch, ["POST"]),
        (f"{one}/status", change_status, ["PATCH"]),
        (f"{one}/events/{{event_type}}", send_event, ["POST"]),
        (one, describe_instance, ["GET"]),
        (one, delete_instance, ["DELETE"]),
    ]
    routes = [Route(path, guarded(handler), methods=methods) for path, handler, methods in table]

    async def unknown(request: Request) -> Response:
        return failure(404, f"no explorer API route {request.method} {request.url.path}", 10000)

    every = ["GET", "POST", "PATCH", "DELETE", "PUT"]
    routes.append(Route(f"{EXPLORER_PREFIX}/{{rest:path}}", unknown, methods=every))
    return routes
