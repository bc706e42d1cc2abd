"""Instances' lifecycle in the log, at info: created, paused, resumed, restarted,
completed, errored, terminated, deleted.

Lines are written once the change is committed (the store calls `observe` for every
committed write), so the log never tells of a change a crash could undo. Each write
carries the instance event log entries `instance.subscribe()` streams
(celld.cells.instance_log), which already say what changed; this module only picks the
lifecycle ones:

* ``workflow_queued`` with a created row: created; with the steps wiped or some deleted
  (a restart, whole or from a step): restarted; otherwise the instance left `paused`
  (a resume: nothing else queues an instance again).
* ``workflow_paused``, ``workflow_completed``, ``workflow_errored`` (with its error),
  ``workflow_terminated``: as named.
* A write that deletes the instance: deleted.

Sleeps, waits and retries (`waiting`, `running`) are not lifecycle and stay out of the
log; `celld workflows instances describe` shows them.
"""

from __future__ import annotations

import logging

import orjson

from celld.store.base import Write

log = logging.getLogger("celld.workflows")

_WATCHED = frozenset(
    {
        "workflow_queued",
        "workflow_paused",
        "workflow_completed",
        "workflow_errored",
        "workflow_terminated",
    }
)


def observe(write: Write) -> None:
    """Log the lifecycle changes of a committed write (called by the store)."""
    if write.delete:
        _line(write, "deleted")
        return
    for _, kind, body in write.log:
        if kind not in _WATCHED:
            continue
        changes = write.changes
        if kind == "workflow_queued":
            if changes.created:
                _line(write, "created")
            elif changes.wiped or changes.deleted_steps:
                _line(write, "restarted")
            else:
                _line(write, "resumed")
        elif kind == "workflow_paused":
            _line(write, "paused")
        elif kind == "workflow_completed":
            _line(write, "completed", _took(write))
        elif kind == "workflow_terminated":
            _line(write, "terminated")
        else:
            error = orjson.loads(body).get("error") or {}
            _line(write, "errored", f": {error.get('name', 'Error')}: {error.get('message', '')}")
    if write.changes.wiped and not any(kind == "workflow_queued" for _, kind, _ in write.log):
        # a restart whose run began before the write was taken: no `queued` entry
        _line(write, "restarted")


def _took(write: Write) -> str:
    instance = write.changes.instance
    if instance is None or instance.started_at is None or instance.finished_at is None:
        return ""
    return f" in {(instance.finished_at - instance.started_at) / 1000:.2f}s"


def _line(write: Write, event: str, detail: str = "") -> None:
    """``<workflow> instance <id> <event><detail>``."""
    workflow, instance_id = write.ref.workflow, write.ref.id
    log.info(
        "%s instance %s %s%s",
        workflow,
        instance_id,
        event,
        detail,
        extra={"fields": {"workflow": workflow, "instance": instance_id, "event": event}},
    )


def enabled() -> bool:
    """Whether lifecycle lines would be written at all (the store skips `observe` if not)."""
    return log.isEnabledFor(logging.INFO)
