"""Step rows as an explicit transition table, as :mod:`celld.engine.lifecycle` does for
instances.

Every change of ``StepRecord.state`` in the machine goes through :func:`step_transition`, so
this table is the whole truth about how a step row moves; anything else raises
:class:`StepTransitionError` (a bug in the machine, never a user error).

Rows by type (the state a row is created in comes first):

``do``
    ``running`` an attempt is running (or ran when the process died: the same attempt number
    runs again, steps are at least once); ``retrying`` an attempt failed and the next one
    waits for ``wake_at``; ``done`` / ``failed`` final, in the journal.
``sleep``
    ``sleeping`` until ``wake_at``; ``done``.
``waitForEvent``
    ``waiting`` until an event of ``event_type`` or ``wake_at``; ``received`` / ``timed_out``.
``rollback`` (a ``do`` step's rollback handler, :mod:`celld.engine.rollback`)
    ``registered`` at the step's first execution; ``running`` / ``retrying`` like ``do``
    while the rollback runs; ``done`` / ``failed`` (``give_up`` from ``registered``: the
    handler could not be found).
``rollbackPhase`` (one per instance)
    ``rolling_back``; ``complete`` (``succeed``) / ``failed`` (``give_up``).

Events:
``attempt`` an attempt starts (first, retry, or again after a crash); ``succeed`` an attempt
returned a value within limits; ``retry`` an attempt failed and another will run;
``give_up`` an attempt failed for good (non-retryable, out of retries, unserialisable,
delay function failed); ``wake`` a sleep's end came; ``receive`` a wait took an event;
``time_out`` a wait's deadline came first.

Rows are never moved back from a final state: a restart deletes them instead.
"""

from __future__ import annotations

from enum import StrEnum


class StepEvent(StrEnum):
    ATTEMPT = "attempt"
    SUCCEED = "succeed"
    RETRY = "retry"
    GIVE_UP = "give_up"
    WAKE = "wake"
    RECEIVE = "receive"
    TIME_OUT = "time_out"


#: (type, state) -> state a new row of that type starts in
INITIAL_STATE = {
    "do": "running",
    "sleep": "sleeping",
    "waitForEvent": "waiting",
    "rollback": "registered",
    "rollbackPhase": "rolling_back",
}

_E = StepEvent

STEP_TRANSITIONS: dict[tuple[str, str, StepEvent], str] = {
    # step.do
    ("do", "running", _E.ATTEMPT): "running",  # the same attempt again (crash or replay)
    ("do", "retrying", _E.ATTEMPT): "running",
    ("do", "running", _E.SUCCEED): "done",
    ("do", "running", _E.RETRY): "retrying",
    ("do", "running", _E.GIVE_UP): "failed",
    # step.sleep / step.sleepUntil
    ("sleep", "sleeping", _E.WAKE): "done",
    # step.waitForEvent
    ("waitForEvent", "waiting", _E.RECEIVE): "received",
    ("waitForEvent", "waiting", _E.TIME_OUT): "timed_out",
    # a rollback handler
    ("rollback", "registered", _E.ATTEMPT): "running",
    ("rollback", "running", _E.ATTEMPT): "running",  # again after a crash
    ("rollback", "retrying", _E.ATTEMPT): "running",
    ("rollback", "running", _E.SUCCEED): "done",
    ("rollback", "running", _E.RETRY): "retrying",
    ("rollback", "running", _E.GIVE_UP): "failed",
    ("rollback", "registered", _E.GIVE_UP): "failed",  # the handler could not be found
    # the instance's rollback phase
    ("rollbackPhase", "rolling_back", _E.SUCCEED): "complete",
    ("rollbackPhase", "rolling_back", _E.GIVE_UP): "failed",
}

del _E


class StepTransitionError(RuntimeError):
    """An illegal step row change."""

    def __init__(self, step_type: str, state: str, event: StepEvent) -> None:
        super().__init__(
            f"illegal step transition: {event.value!r} on a {step_type!r} row in {state!r}"
        )


def step_transition(step_type: str, state: str, event: StepEvent) -> str:
    """The row's state after ``event``; raises :class:`StepTransitionError` if not allowed."""
    try:
        return STEP_TRANSITIONS[(step_type, state, event)]
    except KeyError:
        raise StepTransitionError(step_type, state, event) from None
