"""An instance's event log: the lifecycle and step events `instance.subscribe()` streams.

The log is written with the changes it describes, in the same commit, so a subscriber
never sees an event for a change that was not committed and never misses one that was.
Its entries are derived here, in the cells layer, from what each commit changes (the
instance row and the step rows), compared with what the cell committed before: the
engine stays unaware of it. Each entry is `(timestamp ms, type, body JSON)`; the store
numbers them (`eventId`, increasing per instance).

Shapes follow Cloudflare's `WorkflowInstanceEvent` (docs, "Subscribe to events"). Values
(`params`, `output`) are kept as the serializer's text under `$params` / `$output`, which
the JS side turns back into values; a `sensitive: "output"` step's output is logged as
`"[REDACTED]"` and never stored in the log.

Commits are grouped, so a step that started and finished between two commits is logged
as its whole sequence at once, in order. The usual case, a step begun and done with its
first attempt in one commit, is one compact entry that stands for its four events; the
store expands it when the log is read (celld.store.logpack), so a log nobody reads costs
little more than the step's own row.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson

from celld.engine import Machine, Status, StepRecord
from celld.engine.rollback import COMPLETE as PHASE_COMPLETE
from celld.engine.rollback import PHASE, PHASE_KEY, REGISTERED, ROLLBACK, ROLLING_BACK
from celld.engine.state import Changes, StepKey
from celld.store.logpack import STEP_DONE, step_done_body

#: A logged event before the store numbers it: (timestamp ms, type, body as JSON text).
LogEntry = tuple[int, str, str]

TERMINAL = frozenset({"workflow_completed", "workflow_errored", "workflow_terminated"})
REDACTED_TEXT = '"[REDACTED]"'

_STATUS_EVENT = {
    Status.QUEUED: "workflow_queued",
    Status.RUNNING: "workflow_running",
    Status.WAITING: "workflow_waiting",
    Status.PAUSED: "workflow_paused",
    Status.WAITING_FOR_PAUSE: "workflow_waiting_for_pause",
    Status.COMPLETE: "workflow_completed",
    Status.ERRORED: "workflow_errored",
    Status.TERMINATED: "workflow_terminated",
}
_FINAL = frozenset({Status.COMPLETE, Status.ERRORED, Status.TERMINATED})


@dataclass(slots=True)
class _Seen:
    """What the log already says about an unfinished step row."""

    state: str
    attempts: int  # failed attempts logged
    started: int  # the last attempt logged as started


def _seq(row: StepRecord) -> int:
    return row.seq


#: Parsed step configs and their `step_started` views by config text: a workflow's steps
#: share a few configs, and each new step is logged with its config.
_CONFIGS: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
_CONFIGS_MAX = 512


def _config(text: str | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The config of a step row and its view (treat both as read-only)."""
    if not text:
        return {}, None
    found = _CONFIGS.get(text)
    if found is None:
        data = orjson.loads(text)
        found = (data, _config_view(data))
        if len(_CONFIGS) >= _CONFIGS_MAX:
            _CONFIGS.clear()
        _CONFIGS[text] = found
    return found


_VIEW_TEXTS: dict[str | None, str] = {}


def _view_text(text: str | None, view: dict[str, Any] | None) -> str:
    """`view` (the `step_started` view of config `text`) as JSON, remembered by text."""
    found = _VIEW_TEXTS.get(text)
    if found is None:
        found = orjson.dumps(view).decode()
        if len(_VIEW_TEXTS) >= _CONFIGS_MAX:
            _VIEW_TEXTS.clear()
        _VIEW_TEXTS[text] = found
    return found


def _config_view(data: dict[str, Any]) -> dict[str, Any] | None:
    """`step_started.config`: {retries: {limit, delay, backoff}, timeout, sensitive?}."""
    if "limit" not in data:
        return None
    view: dict[str, Any] = {
        "retries": {"limit": data["limit"], "delay": data["delay"], "backoff": data["backoff"]},
        "timeout": data["timeout"],
    }
    if data.get("sensitive") is not None:
        view["sensitive"] = data["sensitive"]
    return view


class InstanceLog:
    """Turns one cell's commits into log entries; one per cell, fed every write in order."""

    def __init__(self, machine: Machine) -> None:
        state = machine.state
        self._status: Status = state.status
        self._started_at: int | None = state.started_at
        self._now = 0
        self._steps: dict[StepKey, _Seen] = {
            row.key: _Seen(row.state, row.attempts, row.attempts + int(row.state == "running"))
            for row in machine.unfinished_steps()
        }
        if machine.rolling_back:  # the phase row is kept apart from the steps
            self._steps[PHASE_KEY] = _Seen(ROLLING_BACK, 0, 0)

    def entries(self, changes: Changes, now: int) -> list[LogEntry]:
        out: list[LogEntry] = []
        self._now = now

        def emit(kind: str, **body: Any) -> None:
            out.append((now, kind, orjson.dumps(body).decode()))

        instance = changes.instance
        if changes.wiped:
            self._steps.clear()
        if changes.created:
            emit("workflow_queued")
        final: Status | None = None
        if instance is not None:
            status = instance.status
            if instance.started_at is not None and instance.started_at != self._started_at:
                emit("workflow_started", **{"$params": instance.params})
            self._started_at = instance.started_at
            if status != self._status and not (changes.created and status is Status.QUEUED):
                if status in _FINAL:
                    final = status
                    if self._status is not Status.RUNNING and changes.steps:
                        # ran and ended between two writes (a wake-up's last step and the
                        # end, say): the run still went through `running`
                        emit(_STATUS_EVENT[Status.RUNNING])
                else:
                    emit(_STATUS_EVENT[status])
            self._status = status
        phase: StepRecord | None = None
        forward: list[StepRecord] = []
        handlers: list[StepRecord] = []
        for row in changes.steps:
            if row.type == ROLLBACK:
                handlers.append(row)
            else:
                forward.append(row)
                if row.type == PHASE:
                    phase = row
        began = phase is not None and phase.key not in self._steps
        if len(forward) > 1:
            forward.sort(key=_seq)
        for row in forward:
            done_at_once = row.type == "do" and row.state == "done" and not row.attempts
            if done_at_once and row.key not in self._steps:  # begun and done in one commit
                self._done_at_once(row, out)
                continue
            self._step(row, emit)
        if began:
            emit("rollback_started")
        # handlers run newest step first: their rows are logged in that order
        handlers.sort(key=_seq, reverse=True)
        for row in handlers:
            self._rollback(row, emit)
        if phase is not None and phase.state != ROLLING_BACK:
            emit("rollback_completed" if phase.state == PHASE_COMPLETE else "rollback_errored")
        if final is not None and instance is not None:
            if final is Status.COMPLETE:
                emit("workflow_completed", **{"$output": instance.output or "null"})
            elif final is Status.ERRORED:
                error = instance.error.to_dict() if instance.error else None
                emit("workflow_errored", error=error)
            else:
                emit("workflow_terminated")
        return out

    def _step(self, row: StepRecord, emit: Any) -> None:
        seen = self._steps.get(row.key)
        name = f"{row.name}-{row.count}"  # the step's cache key, as wrangler dev names it
        if row.type == "sleep":
            if seen is None:
                duration = (row.wake_at or row.started_at) - row.started_at
                emit("sleep_started", stepName=name, durationMs=max(0, duration))
            if row.finished:
                emit("sleep_completed", stepName=name)
        elif row.type == "waitForEvent":
            if seen is None:
                emit("wait_started", stepName=name, eventType=row.event_type)
            if row.state == "received":
                emit("wait_completed", stepName=name)
            elif row.state == "timed_out":
                emit("wait_timed_out", stepName=name)
        elif row.type == "do":
            seen = self._do(row, seen, emit)
        elif row.type == PHASE:
            self._steps[row.key] = _Seen(row.state, 0, 0)  # its events are emitted above
            return
        else:  # a kind of row this log does not describe
            return
        if row.finished or row.state == "done":
            self._steps.pop(row.key, None)
        else:
            self._steps[row.key] = seen or _Seen(row.state, row.attempts, 0)

    def _done_at_once(self, row: StepRecord, out: list[LogEntry]) -> None:
        """The events of a step whose first attempt began and succeeded since the last
        commit (most steps): one compact entry the store expands when the log is read
        (`STEP_DONE`: step_started, attempt_started, attempt_completed, step_completed)."""
        config, view = _config(row.config)
        sensitive = config.get("sensitive") == "output"
        output = REDACTED_TEXT if sensitive else (row.value or "null")
        body = step_done_body(
            orjson.dumps(f"{row.name}-{row.count}").decode(),
            _view_text(row.config, view),
            orjson.dumps(output).decode(),
        )
        out.append((self._now, STEP_DONE, body))

    def _rollback(self, row: StepRecord, emit: Any) -> None:
        """A rollback handler's row: nothing while it is only registered, then the same
        sequence as a step's, under the `rollback_` names."""
        seen = self._steps.get(row.key)
        if row.state == REGISTERED:
            self._steps[row.key] = _Seen(REGISTERED, 0, 0)
            return
        if seen is not None and seen.state == REGISTERED:
            seen = None
        seen = self._do(row, seen, emit, prefix="rollback_")
        if row.finished:
            self._steps.pop(row.key, None)
        else:
            self._steps[row.key] = seen

    def _do(self, row: StepRecord, seen: _Seen | None, emit: Any, prefix: str = "") -> _Seen:
        """A step's (or, with `prefix`, a rollback handler's) events since `seen`."""
        name = f"{row.name}-{row.count}"
        config, view = _config(row.config)
        step_started, step_completed = f"{prefix}step_started", f"{prefix}step_completed"
        attempt_started, attempt_errored = f"{prefix}attempt_started", f"{prefix}attempt_errored"
        if seen is None:
            emit(step_started, stepName=name, config=view)
            emit(attempt_started, stepName=name, attempt=1)
            seen = _Seen("running", 0, 1)
        error = row.error.to_dict() if row.error else {"name": "Error", "message": ""}
        failed = row.attempts
        if row.state == "failed" and failed == seen.attempts:
            failed += 1  # an attempt that failed without being counted (unserializable)
        for attempt in range(seen.attempts + 1, failed + 1):
            if seen.started < attempt:
                emit(attempt_started, stepName=name, attempt=attempt)
            body: dict[str, Any] = {"stepName": name, "attempt": attempt, "error": error}
            last = attempt == failed
            if last and row.state == "retrying" and row.wake_at is not None:
                body["retryDelayMs"] = max(0, row.wake_at - self._now)
            emit(attempt_errored, **body)
            seen.started = attempt
            if not last or row.state in ("running", "done"):
                emit(attempt_started, stepName=name, attempt=attempt + 1)
                seen.started = attempt + 1
        seen.attempts = failed
        if row.state == "done":
            if seen.started < failed + 1:
                emit(attempt_started, stepName=name, attempt=failed + 1)
            emit(f"{prefix}attempt_completed", stepName=name, attempt=failed + 1)
            if prefix:
                emit(step_completed, stepName=name)
            else:
                sensitive = config.get("sensitive") == "output"
                output = REDACTED_TEXT if sensitive else (row.value or "null")
                emit(step_completed, stepName=name, **{"$output": output})
        elif row.state == "failed":
            if prefix:
                emit(f"{prefix}step_errored", stepName=name, error=error)
            else:
                emit("step_errored", stepName=name)
        seen.state = row.state
        return seen


class LogHub:
    """Wakes the subscribers of an instance when a commit adds to its log."""

    def __init__(self) -> None:
        self._waiters: dict[Any, set[asyncio.Future[None]]] = {}

    def notify(self, ref: Any) -> None:
        for future in self._waiters.pop(ref, ()):
            if not future.done():
                future.set_result(None)

    def notify_all(self) -> None:
        """Wake every subscriber (each reads its log again): commits may have been missed."""
        for ref in list(self._waiters):
            self.notify(ref)

    async def wait(self, ref: Any, timeout_s: float) -> None:
        """Return at the next commit that logs for `ref`, or after `timeout_s`."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(ref, set())
        waiters.add(future)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            pass
        finally:
            waiters.discard(future)
            if not waiters and self._waiters.get(ref) is waiters:
                del self._waiters[ref]
