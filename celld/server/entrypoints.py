"""What a session's bindings require a Worker to export or define, checked at start.

``wrangler dev`` refuses to start when a binding names something its target cannot provide,
and so does celld, with the same sentences (wrangler's internal service names, such as
``core:user:back``, become the Worker's own name):

* a service binding with ``entrypoint`` naming a class the target Worker (running in the
  session) does not export: "...has no such named entrypoint" (workerd's check);
* a workflow with ``script_name`` naming a running Worker that does not export its class:
  the same sentence, about the Worker that runs the workflow;
* a Durable Object binding with ``script_name`` naming a running Worker whose config
  defines no such class (no binding of it without ``script_name``): "...no such Durable
  Object namespace is defined by that service" (workerd's check, from the configs alone);
* a Worker's own Durable Object classes and workflows (no ``script_name``) that its main
  module does not export: "Your Worker depends on the following ..." (wrangler's check
  after bundling).

Bindings to Workers that are not running are not checked: they start "not connected"
(celld.bindings.unconnected). Exports are read from a loaded isolate of each Worker
(`WorkerPool.export_names`), so a module's runtime exports count as they do for workerd.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from celld.project.config import ProjectConfig


class BindingRefused(ValueError):
    """A binding names something its target Worker does not provide; the session does not
    start. The message holds one line per refusal."""


@dataclass(frozen=True)
class Required:
    """Worker `target` must export every name of `exports`; `message` is the refusal, with
    ``{missing}`` standing for the names it does not export."""

    target: str
    exports: tuple[str, ...]
    message: str


def _no_entrypoint(source: str, target: str, entrypoint: str) -> str:
    return (
        f'{source} refers to service "{target}" with a named entrypoint "{entrypoint}", '
        f'but "{target}" has no such named entrypoint.'
    )


def _shown(path: Path) -> str:
    """A path as wrangler shows it: relative to the folder celld was started in."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def namespace_refusals(projects: Sequence[ProjectConfig]) -> list[str]:
    """Durable Object bindings naming a class that the running Worker of `script_name`
    does not define (read from the configs; nothing needs to run)."""
    by_name = {project.name: project for project in projects}
    refused = []
    for project in projects:
        for binding in project.bindings.objects.unconnected:
            target = by_name.get(binding.script_name or "")
            if target is None:
                continue  # not running: "not connected", fails at call
            defined = {b.class_name for b in target.bindings.objects.bindings}
            if binding.class_name not in defined:
                refused.append(
                    f'Worker "{project.name}"\'s binding "{binding.binding}" refers to a '
                    f'Durable Object namespace named "{binding.class_name}" in service '
                    f'"{target.name}", but no such Durable Object namespace is defined by '
                    "that service."
                )
    return refused


def required_exports(projects: Sequence[ProjectConfig]) -> list[Required]:
    """Every export some binding of the session needs, with the refusal if it is missing."""
    running = {project.name for project in projects}
    needed: list[Required] = []
    for project in projects:
        own = project.name
        for service in project.bindings.services:
            if service.entrypoint and service.service in running:
                source = f'Worker "{own}"\'s binding "{service.binding}"'
                message = _no_entrypoint(source, service.service, service.entrypoint)
                needed.append(Required(service.service, (service.entrypoint,), message))
        for workflow in project.workflows:
            if workflow.unconnected is not None and workflow.unconnected in running:
                source = (
                    f'Workflow "{workflow.name}" (binding "{workflow.binding}" of Worker "{own}")'
                )
                message = _no_entrypoint(source, workflow.unconnected, workflow.class_name)
                needed.append(Required(workflow.unconnected, (workflow.class_name,), message))
        # an assets-only Worker has no classes of its own (celld.project.assets_only)
        main = _shown(project.main) if project.main is not None else ""
        for kind, classes in (
            ("Durable Objects", [b.class_name for b in project.bindings.objects.bindings]),
            ("Workflows", [w.class_name for w in project.workflows if w.unconnected is None]),
        ):
            if classes:
                message = (
                    f"Your Worker depends on the following {kind}, which are not exported in "
                    "your entrypoint file: {missing}.\nYou should export these objects "
                    f"from your entrypoint, {main}."
                )
                needed.append(Required(own, tuple(dict.fromkeys(classes)), message))
    return needed


async def export_refusals(
    projects: Sequence[ProjectConfig],
    exports_of: Callable[[str], Awaitable[frozenset[str]]],
) -> list[str]:
    """The refusals of `required_exports` whose export is missing; `exports_of(worker)`
    reads a running Worker's exports (once per Worker)."""
    known: dict[str, frozenset[str]] = {}
    refused = []
    for required in required_exports(projects):
        if required.target not in known:
            known[required.target] = await exports_of(required.target)
        missing = [name for name in required.exports if name not in known[required.target]]
        if missing:
            refused.append(required.message.replace("{missing}", ", ".join(missing)))
    return refused
