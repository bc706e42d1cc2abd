"""Bindings to other Workers, and which of them are running in this celld session.

A Durable Object binding or a workflow with a ``script_name`` naming another Worker binds a
class of that Worker; a service binding binds that Worker itself. When the Worker runs in
the same `celld run` (several configs, as ``wrangler dev -c a -c b`` runs them) the binding
is connected to it (celld.server.session). When it does not, ``wrangler dev`` starts anyway,
lists the binding as "not connected", and fails only a call through it, with the message
below; celld does the same: one warning at start naming each such binding and its Worker,
and the error at each call (js/objects/namespace.js, js/bindings/service.js,
js/workflows/step.js).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import NamedTuple

from celld.project.config import ProjectConfig

log = logging.getLogger("celld.bindings")


class OtherWorkerBinding(NamedTuple):
    """A binding of `project` to something of Worker `worker`, described for a warning."""

    worker: str
    description: str


def not_found_message(worker: str) -> str:
    """wrangler dev's words for a call to a Worker that is not running."""
    return f'Worker "{worker}" not found. Make sure it is running locally.'


def other_worker_bindings(project: ProjectConfig) -> list[OtherWorkerBinding]:
    """Every binding of `project` to another Worker, in the config's order."""
    found = [
        OtherWorkerBinding(
            b.script_name,
            f"env.{b.binding} (Durable Object {b.class_name} of Worker {b.script_name!r})",
        )
        for b in project.bindings.objects.unconnected
        if b.script_name is not None
    ]
    found += [
        OtherWorkerBinding(
            w.unconnected, f"env.{w.binding} (Workflow {w.class_name} of Worker {w.unconnected!r})"
        )
        for w in project.workflows
        if w.unconnected is not None
    ]
    found += [
        OtherWorkerBinding(
            s.service,
            f"env.{s.binding} (Service {s.service!r}"
            + (f" entrypoint {s.entrypoint}" if s.entrypoint else "")
            + ")",
        )
        for s in project.bindings.services
        if s.service != project.name
    ]
    return found


def unconnected_warning(project: ProjectConfig, running: Collection[str] = ()) -> str | None:
    """The start-up warning naming every binding to a Worker that is not among `running`
    (the session's Workers), or None."""
    names = [b.description for b in other_worker_bindings(project) if b.worker not in running]
    if not names:
        return None
    return (
        "these bindings name other Workers, which are not running here (not connected); "
        f"calls through them will fail: {', '.join(names)}"
    )


def warn_unconnected(project: ProjectConfig, running: Collection[str] = ()) -> None:
    message = unconnected_warning(project, running)
    if message:
        log.warning("%s", message)
