"""Bindings to other Workers, which are not running in this celld session.

A Durable Object binding or a workflow with a ``script_name`` naming another Worker binds a
class of that Worker. ``wrangler dev`` starts such a Worker anyway, lists the binding as
"not connected", and fails only a call through it, with the message below; celld does the
same: one warning at start naming each binding and its Worker, and the error at each call
(js/objects/namespace.js, js/workflows/step.js).
"""

from __future__ import annotations

import logging

from celld.project.config import ProjectConfig

log = logging.getLogger("celld.bindings")


def not_found_message(worker: str) -> str:
    """wrangler dev's words for a call to a Worker that is not running."""
    return f'Worker "{worker}" not found. Make sure it is running locally.'


def unconnected_warning(project: ProjectConfig) -> str | None:
    """The start-up warning naming every binding to a Worker that is not running, or None."""
    names = [
        f"env.{b.binding} (Durable Object {b.class_name} of Worker {b.script_name!r})"
        for b in project.bindings.objects.unconnected
    ]
    names += [
        f"env.{w.binding} (Workflow {w.class_name} of Worker {w.unconnected!r})"
        for w in project.workflows
        if w.unconnected is not None
    ]
    if not names:
        return None
    return (
        "these bindings name other Workers, which are not running here (not connected); "
        f"calls through them will fail: {', '.join(names)}"
    )


def warn_unconnected(project: ProjectConfig) -> None:
    message = unconnected_warning(project)
    if message:
        log.warning("%s", message)
