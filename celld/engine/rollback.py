"""Rollback handlers (saga): the rules, as plain data and pure functions.

``step.do(name, [config], cb, {rollback, rollbackConfig})`` registers a compensating handler
for that step. The rules (each has a unit test in ``tests/engine/test_engine_rollback.py``):

1. **Registration is durable at the step's first execution.** When the machine creates a
   ``do`` row for a call that carries a rollback, it creates a sibling row
   ``StepKey("rollback", name, count)`` in state ``registered`` with the same ``seq`` (the
   step's start order) and the resolved ``rollbackConfig`` (same rules and defaults as a step
   config; a bad one is refused like a bad step config, and nothing is recorded). A step
   replayed from the journal registers nothing new.
2. **Eligible** rows are rollback rows not finished (``registered``, ``running``,
   ``retrying``): the steps that started with a handler, whether they succeeded, failed or
   were still running. They run in **reverse step-start order** (``seq`` descending).
3. **When.** A rollback begins when the instance would fail (``run()`` threw, or the engine
   failed it) or on ``terminate({rollback: true})``, and only if something is eligible;
   otherwise the instance fails or terminates at once as before. While it runs, the status
   is ``running`` (from any unfinished status), the forward run is over (its calls are
   stale) and pause/resume do nothing.
4. **Each handler** gets ``{ctx, error, output, stepName}``: the forward step's context,
   the error that triggered the rollback (``Error: Instance terminated during rollback``
   for terminate, as wrangler dev), the step's output (``undefined`` unless it
   succeeded). It has its own retries, backoff and per-attempt timeout (``rollbackConfig``);
   ``NonRetryableError`` stops its retries. Attempt starts are not written (at least once);
   a handler that finished is committed as ``done`` and never runs again.
5. **The first handler that fails for good ends the rollback** as ``failed`` (the rest are
   not run, as wrangler dev); when all succeed it is ``complete``. A handler the runtime
   cannot find again after a restart fails with ``RollbackMissing``.
6. **The phase** is one row ``StepKey("rollbackPhase", "", 0)``: ``rolling_back`` ->
   ``complete`` | ``failed``, holding the trigger error and the reason (``fail`` or
   ``terminate``). It survives restarts of celld, so a half-done rollback goes on. When it
   ends, the instance becomes ``errored`` (reason ``fail``, with the original error) or
   ``terminated``, and ``status().rollback`` is ``{outcome, error}``.
7. ``terminate()`` during a rollback stops it: the rollback is ``failed`` (``Terminated``)
   and the instance ``terminated``. ``restart()`` forgets the phase.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .errors import DOCS_RETRY_URL, ErrorInfo, fatal
from .state import DO_DONE, DO_RUNNING, StepKey, StepRecord
from .stepconfig import StepConfig

ROLLBACK = "rollback"
PHASE = "rollbackPhase"
PHASE_KEY = StepKey(PHASE, "", 0)

# rollback row states
REGISTERED = "registered"
RB_RUNNING = "running"
RB_RETRYING = "retrying"
RB_DONE = "done"
RB_FAILED = "failed"
UNFINISHED = frozenset({REGISTERED, RB_RUNNING, RB_RETRYING})

# phase row states
ROLLING_BACK = "rolling_back"
COMPLETE = "complete"
PHASE_FAILED = "failed"

REASON_FAIL = "fail"
REASON_TERMINATE = "terminate"

#: The error handlers receive on terminate({rollback: true}): wrangler dev's message; its
#: handlers see the name ``Error`` (the engine's ``Terminated`` does not survive RPC).
TERMINATE_TRIGGER = ErrorInfo("Error", "Instance terminated during rollback")
#: A rollback stopped by terminate() while it ran.
STOPPED = ErrorInfo("Terminated", "terminate() stopped the rollback")
#: A handler the runtime could not find again (wrangler dev's words).
MISSING = ErrorInfo("RollbackMissing", "Rollback function not available in registry")


def rollback_key(key: StepKey) -> StepKey:
    """The rollback row of ``do`` step ``key``."""
    return StepKey(ROLLBACK, key.name, key.count)


def forward_key(key: StepKey) -> StepKey:
    """The ``do`` step a rollback row belongs to."""
    return StepKey("do", key.name, key.count)


def invalid_rollback_config(name: str) -> ErrorInfo:
    return fatal(f'Rollback config for "{name}" is in a invalid format. See {DOCS_RETRY_URL}')


def registration(key: StepKey, seq: int, config: StepConfig, now: int) -> StepRecord:
    """Rule 1: the row that records a handler for step ``key``."""
    return StepRecord(
        type=ROLLBACK,
        name=key.name,
        count=key.count,
        seq=seq,
        state=REGISTERED,
        config=config.to_json(),
        started_at=now,
    )


def eligible(rows: Iterable[StepRecord]) -> list[StepRecord]:
    """Rule 2: unfinished rollback rows, newest step first."""
    found = [r for r in rows if r.type == ROLLBACK and r.state in UNFINISHED]
    return sorted(found, key=lambda r: r.seq, reverse=True)


def phase_row(reason: str, trigger: ErrorInfo, fold: bool, now: int) -> StepRecord:
    """Rule 6: the phase row of a rollback that begins now. ``fold``: the instance error is
    ``status_error(trigger)`` (a user error from ``run()``), else ``trigger`` as is."""
    return StepRecord(
        type=PHASE,
        name="",
        count=0,
        seq=0,
        state=ROLLING_BACK,
        value=json.dumps({"reason": reason, "fold": fold, "error": None}),
        error=trigger,
        started_at=now,
    )


def phase_info(row: StepRecord) -> dict[str, Any]:
    """``{reason, fold, error}`` of a phase row."""
    return json.loads(row.value or "{}")


def end_phase(row: StepRecord, error: ErrorInfo | None, now: int) -> None:
    """Record how the rollback ended (the caller moves ``state``)."""
    info = phase_info(row)
    info["error"] = error.to_dict() if error is not None else None
    row.value = json.dumps(info)
    row.finished_at = now


def outcome(row: StepRecord | None) -> dict[str, Any] | None:
    """``status().rollback``: ``{outcome, error}`` once a rollback ended, else ``None``."""
    if row is None or row.state == ROLLING_BACK:
        return None
    return {"outcome": row.state, "error": phase_info(row).get("error")}


def progress(phase: StepRecord | None, rows: Iterable[StepRecord]) -> dict[str, Any] | None:
    """An operator's view of a rollback: its state, reason, trigger and every handler in
    the order they run (``None`` if no rollback began)."""
    if phase is None:
        return None
    info = phase_info(phase)
    handlers = sorted((r for r in rows if r.type == ROLLBACK), key=lambda r: r.seq, reverse=True)
    return {
        "state": phase.state,
        "reason": info.get("reason"),
        "trigger": phase.error.to_dict() if phase.error else None,
        "error": info.get("error"),
        "started_at": phase.started_at,
        "finished_at": phase.finished_at,
        "steps": [
            {
                "name": r.name,
                "count": r.count,
                "state": r.state,
                "failed_attempts": r.attempts,
                "retry_at": r.wake_at if r.state == RB_RETRYING else None,
                "error": r.error.to_dict() if r.error else None,
                "finished_at": r.finished_at,
            }
            for r in handlers
        ],
    }


def forward_context(row: StepRecord, config: StepConfig) -> dict[str, Any]:
    """Rule 4: the forward step's ``ctx`` as its rollback handler sees it."""
    attempt = row.attempts + 1 if row.state in (DO_DONE, DO_RUNNING) else row.attempts
    return {
        "step": {"name": row.name, "count": row.count},
        "attempt": max(1, attempt),
        "config": config.to_context(),
    }


def plan_entry(rb: StepRecord, forward: StepRecord | None, config: StepConfig) -> dict[str, Any]:
    """What the runtime needs to call one handler: its key, the forward ``ctx`` and
    ``output`` (serialized text, or ``None`` for ``undefined``) and ``stepName``."""
    if forward is None:  # cannot happen with a consistent journal; the handler still runs
        context = {"step": {"name": rb.name, "count": rb.count}, "attempt": 1, "config": {}}
        output = None
    else:
        context = forward_context(forward, config)
        output = forward.value if forward.state == DO_DONE else None
    return {
        "key": str(forward_key(rb.key)),
        "rollbackKey": str(rb.key),
        "context": context,
        "output": output,
        "stepName": f"{rb.name}-{rb.count}",
    }
