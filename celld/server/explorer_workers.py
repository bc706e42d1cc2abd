"""GET /cdn-cgi/local/explorer/api/local/workers: the Workers of the session and their
resources, as ``wrangler dev``'s local explorer lists them.

One entry per Worker running in this `celld run`, in the order they were given (the served
one first), each ``isSelf`` (this server hosts it): its KV, D1 and R2 bindings (``id`` the
namespace, database or bucket), Durable Object bindings (``id`` ``<worker>-<class>``, the
Worker that runs the class, and whether its storage has SQL), workflows (``id`` the
workflow's name, ``scriptName`` the Worker that runs it), `send_email` bindings, the cron
expressions of ``[triggers]``, and ``persistenceScope``: the opaque hash wrangler derives
from the folder it was started in, which the explorer page keys its browser-side state by.
celld has no flagship bindings, so that list is always empty.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from celld.project.config import ProjectConfig
from celld.project.environments import select_environment
from celld.project.files import read_raw
from celld.server.explorer import EXPLORER_PREFIX, envelope


def persistence_scope(folder: str) -> str:
    """wrangler's opaque id of a project folder (a hash: the path itself is not shown)."""
    text = f"local-explorer:persistence-scope:v1\0{os.path.abspath(folder)}"
    return hashlib.sha256(text.encode()).hexdigest()


def _crons(project: ProjectConfig) -> list[str]:
    """The config's `[triggers] crons` (celld keeps them nowhere else: they fire by hand)."""
    raw = select_environment(project.path, read_raw(project.path), project.env).raw
    triggers = raw.get("triggers")
    crons = triggers.get("crons") if isinstance(triggers, dict) else None
    return [c for c in crons if isinstance(c, str)] if isinstance(crons, list) else []


def worker_entry(project: ProjectConfig, session: dict[str, ProjectConfig]) -> dict[str, Any]:
    """One Worker as the explorer lists it; `session` names every running Worker (the SQL
    flag of another Worker's class is that Worker's)."""
    own = project.name
    bindings = project.bindings

    def uses_sql(worker: str, class_name: str) -> bool:
        host = session.get(worker)
        return host is not None and dict(host.bindings.objects.classes).get(class_name, False)

    objects = []
    for b in (*bindings.objects.bindings, *bindings.objects.unconnected):
        worker = b.script_name or own
        objects.append(
            {
                "id": f"{worker}-{b.class_name}",
                "bindingName": b.binding,
                "className": b.class_name,
                "scriptName": worker,
                "useSqlite": uses_sql(worker, b.class_name),
            }
        )
    return {
        "isSelf": True,
        "name": own,
        "bindings": {
            "kv": [{"id": kv.id, "bindingName": kv.binding} for kv in bindings.kv],
            "d1": [{"id": db.id, "bindingName": db.binding} for db in bindings.d1],
            "r2": [{"id": r2.bucket_name, "bindingName": r2.binding} for r2 in bindings.r2],
            "do": objects,
            "workflows": [
                {
                    "id": w.name,
                    "bindingName": w.binding,
                    "className": w.class_name,
                    "scriptName": w.script_name or own,
                }
                for w in project.workflows
            ],
            "sendEmail": [
                {"bindingName": o.binding} for o in bindings.offline if o.kind == "send_email"
            ],
            "flagship": [],
        },
        "triggers": {"crons": _crons(project)},
        "persistenceScope": persistence_scope(os.getcwd()),
    }


def workers_routes(projects: Callable[[], Sequence[ProjectConfig]]) -> list[Route]:
    """The route; `projects()` gives the session's Workers, the served one first."""

    async def list_workers(request: Request) -> JSONResponse:
        running = list(projects())
        session = {p.name: p for p in running}
        return envelope([worker_entry(p, session) for p in running])

    return [Route(f"{EXPLORER_PREFIX}/local/workers", list_workers, methods=["GET"])]
