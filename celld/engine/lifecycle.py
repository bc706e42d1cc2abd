"""The instance lifecycle as an explicit transition table (h11 style).

Every status change in the machine goes through :func:`transition`, so the table below is the
whole truth about which changes are legal; anything else raises :class:`LifecycleError` (a bug
in the caller or the machine, never a user error).

Events:
``start`` a run (re)starts from the top; ``suspend`` JS went idle with only waits pending;
``wake`` something pending resolved; ``pause_requested`` / ``pause_settled`` the two halves of a
pause (settled at once when no attempt is in flight); ``resume``; ``terminate``; ``restart``;
``complete``; ``fail``; ``rollback`` a rollback begins (the instance failed, or was
terminated with ``{rollback: true}``): it reads ``running`` while the handlers run, then
``fail`` or ``terminate`` ends it (:mod:`celld.engine.rollback`).
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """Wire values of ``status().status``."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    ERRORED = "errored"
    TERMINATED = "terminated"
    COMPLETE = "complete"
    WAITING = "waiting"
    WAITING_FOR_PAUSE = "waitingForPause"


class LifecycleEvent(StrEnum):
    START = "start"
    SUSPEND = "suspend"
    WAKE = "wake"
    PAUSE_REQUESTED = "pause_requested"
    PAUSE_SETTLED = "pause_settled"
    RESUME = "resume"
    TERMINATE = "terminate"
    RESTART = "restart"
    COMPLETE = "complete"
    FAIL = "fail"
    ROLLBACK = "rollback"


FINAL = frozenset({Status.COMPLETE, Status.ERRORED, Status.TERMINATED})
#: Statuses in which a JS run may be live and talking to the machine.
ACTIVE = frozenset({Status.RUNNING, Status.WAITING, Status.WAITING_FOR_PAUSE})

S, E = Status, LifecycleEvent

TRANSITIONS: dict[tuple[Status, LifecycleEvent], Status] = {
    # a run starts or replays from the top
    (S.QUEUED, E.START): S.RUNNING,
    (S.RUNNING, E.START): S.RUNNING,
    (S.WAITING, E.START): S.RUNNING,
    # idle with only sleeps / event waits / retry delays pending, and back
    (S.RUNNING, E.SUSPEND): S.WAITING,
    (S.WAITING, E.WAKE): S.RUNNING,
    # pause: requested, then settled once no attempt is in flight
    (S.QUEUED, E.PAUSE_REQUESTED): S.WAITING_FOR_PAUSE,
    (S.RUNNING, E.PAUSE_REQUESTED): S.WAITING_FOR_PAUSE,
    (S.WAITING, E.PAUSE_REQUESTED): S.WAITING_FOR_PAUSE,
    (S.WAITING_FOR_PAUSE, E.PAUSE_SETTLED): S.PAUSED,
    # resume: a paused instance is queued for a fresh run; a pending pause is cancelled
    (S.PAUSED, E.RESUME): S.QUEUED,
    (S.WAITING_FOR_PAUSE, E.RESUME): S.RUNNING,
    # terminate: anything not final
    (S.QUEUED, E.TERMINATE): S.TERMINATED,
    (S.RUNNING, E.TERMINATE): S.TERMINATED,
    (S.WAITING, E.TERMINATE): S.TERMINATED,
    (S.PAUSED, E.TERMINATE): S.TERMINATED,
    (S.WAITING_FOR_PAUSE, E.TERMINATE): S.TERMINATED,
    # restart: from anywhere (wrangler dev restarts finished instances too)
    **{(status, E.RESTART): S.QUEUED for status in Status},
    # run() returned / threw, or the engine failed the instance
    (S.RUNNING, E.COMPLETE): S.COMPLETE,
    (S.WAITING, E.COMPLETE): S.COMPLETE,
    (S.WAITING_FOR_PAUSE, E.COMPLETE): S.COMPLETE,
    (S.QUEUED, E.FAIL): S.ERRORED,
    (S.RUNNING, E.FAIL): S.ERRORED,
    (S.WAITING, E.FAIL): S.ERRORED,
    (S.WAITING_FOR_PAUSE, E.FAIL): S.ERRORED,
    # a rollback begins: running until its handlers are done, from anything not final
    **{(status, E.ROLLBACK): S.RUNNING for status in Status if status not in FINAL},
}

del S, E


class LifecycleError(RuntimeError):
    """An illegal status transition."""

    def __init__(self, status: Status, event: LifecycleEvent) -> None:
        super().__init__(f"illegal lifecycle transition: {event.value!r} while {status.value!r}")
        self.status = status
        self.event = event


def can(status: Status, event: LifecycleEvent) -> bool:
    return (status, event) in TRANSITIONS


#: The operator's actions (the explorer API's `PATCH .../status` values, the binding's
#: instance methods) and the lifecycle event each one asks for.
OPERATOR_ACTIONS: dict[str, LifecycleEvent] = {
    "pause": LifecycleEvent.PAUSE_REQUESTED,
    "resume": LifecycleEvent.RESUME,
    "terminate": LifecycleEvent.TERMINATE,
    "restart": LifecycleEvent.RESTART,
}
#: What the machine still does while a rollback runs (the instance reads ``running``):
#: a terminate stops the rollback and a restart forgets it; a pause or resume is a no-op.
DURING_ROLLBACK = frozenset({"terminate", "restart"})


def allowed_actions(status: Status | str, *, rolling_back: bool = False) -> tuple[str, ...]:
    """The operator actions that change an instance in ``status``, in the order of
    :data:`OPERATOR_ACTIONS`: those whose event the table allows from it. The others are
    no-ops (pause, resume) or refused (terminate on a final status), so tools offer only
    these (the operator page's buttons come from here)."""
    current = Status(status)
    return tuple(
        action
        for action, event in OPERATOR_ACTIONS.items()
        if can(current, event) and (not rolling_back or action in DURING_ROLLBACK)
    )


def transition(status: Status, event: LifecycleEvent) -> Status:
    """The status after ``event``; raises :class:`LifecycleError` if it is not allowed."""
    try:
        return TRANSITIONS[(status, event)]
    except KeyError:
        raise LifecycleError(status, event) from None
