"""What the operator sees of queues and WebSocket-holding Durable Objects, for every Worker
of the session: one place that reads them, shared by the JSON routes (the web page and
`celld queues list`) and the Prometheus metrics.

GET /cdn-cgi/celld/queues: each queue's depth (ready + delayed), in flight, dead-lettered
and dropped (since start), and the Worker consuming it.
GET /cdn-cgi/celld/objects/websockets: each Durable Object holding open WebSockets it
accepted with `ctx.acceptWebSocket()`, with their count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from celld.server.app import INTERNAL_PREFIX

if TYPE_CHECKING:
    from celld.isolate.websockets import SocketHub
    from celld.queues.broker import QueueBroker


def queue_rows(broker: QueueBroker | None) -> list[dict[str, Any]]:
    """The session's queues (none until a Worker uses one)."""
    if broker is None or not broker.opened:
        return []
    return broker.queues()


def object_socket_rows(hubs: Iterable[tuple[str, SocketHub]]) -> list[dict[str, Any]]:
    """Durable Objects with open accepted WebSockets, by (Worker, socket hub)."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for worker, hub in hubs:
        for end in list(hub.ends.values()):
            if end.owner is None or end.done:
                continue
            cls, object_id = str(end.owner.cls), str(end.owner.id)
            row = rows.setdefault(
                (worker, cls, object_id),
                {"worker": worker, "class": cls, "id": object_id, "name": None, "websockets": 0},
            )
            row["websockets"] += 1
            row["name"] = row["name"] or end.owner_name
    return [rows[key] for key in sorted(rows)]


def live_routes(
    broker: Callable[[], QueueBroker | None],
    hubs: Callable[[], Iterable[tuple[str, SocketHub]]],
) -> list[Route]:
    async def queues(request: Request) -> Response:
        return JSONResponse({"success": True, "result": queue_rows(broker())})

    async def sockets(request: Request) -> Response:
        return JSONResponse({"success": True, "result": object_socket_rows(hubs())})

    return [
        Route(f"{INTERNAL_PREFIX}/queues", queues, methods=["GET"]),
        Route(f"{INTERNAL_PREFIX}/objects/websockets", sockets, methods=["GET"]),
    ]
