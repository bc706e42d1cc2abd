"""Every attempt of an instance's steps, with its start, end and error, for the operator's
views (`wrangler workflows instances describe`, `celld workflows`, the page).

A step row keeps the count of failed attempts and the last error, not a row per attempt;
the instance's event log (the one `instance.subscribe()` streams, committed with every
change) has each attempt's start and its end or error. This module reads them back:

* ``step_started`` begins a step's history anew (a restart runs the step again);
* ``attempt_started`` adds an attempt, ``attempt_completed`` and ``attempt_errored`` end
  the last one (the error is in the entry).

Log entries carry the time of the commit that wrote them, a moment after the fact; the
step row's own times are exact, so the first attempt starts at the row's start and the
last one of a finished step ends at the row's end. What the row knows and the log does
not yet (an attempt whose commit is under way) is taken from the row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from celld.server.values import iso
from celld.store.base import InstanceRef, LogRow, Store

#: log rows read per query
PAGE = 2_000


async def logged_attempts(store: Store, ref: InstanceRef) -> dict[str, list[dict[str, Any]]]:
    """Each `step.do`'s attempts by its cache key (``<name>-<count>``), from the log:
    ``{start, end, success, error}`` with times in epoch ms."""
    found: dict[str, list[dict[str, Any]]] = {}
    after = 0
    while True:
        rows = await store.log_after(ref, after, PAGE)
        read_log(rows, found)
        if len(rows) < PAGE:
            return found
        after = rows[-1].event_id


def read_log(
    rows: Iterable[LogRow], found: dict[str, list[dict[str, Any]]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """`rows` (oldest first) added to `found`: attempts by step cache key."""
    found = {} if found is None else found
    for row in rows:
        _apply(found, row)
    return found


def _apply(found: dict[str, list[dict[str, Any]]], row: LogRow) -> None:
    kind = row.type
    if kind not in ("step_started", "attempt_started", "attempt_completed", "attempt_errored"):
        return
    body = orjson.loads(row.body)
    name = body.get("stepName")
    if not isinstance(name, str):
        return
    if kind == "step_started":
        found[name] = []
        return
    attempts = found.setdefault(name, [])
    if kind == "attempt_started":
        attempts.append({"start": row.timestamp, "end": None, "success": None, "error": None})
        return
    if not attempts:
        return
    last = attempts[-1]
    last["end"] = row.timestamp
    last["success"] = kind == "attempt_completed"
    if kind == "attempt_errored":
        last["error"] = body.get("error")


def attempts_of(row: dict[str, Any], logged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A `step.do` row's attempts (``{attempt, start, end, success, error}``, ISO times):
    the logged ones, reconciled with what the row says."""
    failed = int(row.get("failed_attempts") or 0)
    state = row["state"]
    total = failed + (1 if state in ("running", "done") else 0)
    attempts = [dict(a) for a in logged[:total]]
    while len(attempts) < total:
        attempts.append({"start": None, "end": None, "success": None, "error": None})
    for index, attempt in enumerate(attempts):
        if index < failed:
            attempt["success"] = False
    if attempts:
        if row.get("started_at") is not None:
            attempts[0]["start"] = row["started_at"]
        last = attempts[-1]
        if state == "done":
            last.update(success=True, error=None)
            last["end"] = row.get("finished_at") or last["end"]
        elif state == "running":
            last.update(success=None, end=None, error=None)
        elif state == "failed":
            last["end"] = row.get("finished_at") or last["end"]
        if state in ("failed", "retrying") and last["error"] is None:
            last["error"] = row.get("error")
    return [
        {
            "attempt": number,
            "start": iso(a["start"]),
            "end": iso(a["end"]),
            "success": a["success"],
            "error": a["error"],
        }
        for number, a in enumerate(attempts, start=1)
    ]
