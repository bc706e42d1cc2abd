"""How a run's answers to JS end when they cannot carry a decision, and how JS's reports of
a failed attempt read (shared by the step protocol, rollback runs and held calls)."""

from __future__ import annotations

import asyncio
from typing import Any

from celld.engine import ErrorInfo
from celld.isolate.host import AnswerWithdrawn, Later, Outcome
from celld.store.base import StoreUnavailable


class RunStopped(AnswerWithdrawn):
    """The run this request belonged to is over (paused, terminated, failed, evicted)."""


def failure_keywords(m: dict[str, Any]) -> dict[str, Any]:
    """How a failed attempt went, from its report (`attemptOnce` in js/workflows/step.js),
    as the machine's `attempt_failed` / `rollback_attempt_failed` keywords."""
    delay_error = m.get("delayError")
    return {
        "nonretryable": bool(m.get("nonretryable")),
        "timed_out": bool(m.get("timedOut")),
        "delay_ms": m.get("delay"),
        "delay_error": ErrorInfo.from_dict(delay_error) if delay_error else None,
        "delay_timed_out": bool(m.get("delayTimedOut")),
    }


def fail_answer(answer: Later, error: BaseException) -> None:
    """A commit failed under `answer`: a store failure broke the cell (it is reloaded from
    the store and this run is over: nothing is delivered); anything else goes to JS."""
    if isinstance(error, StoreUnavailable) or not isinstance(error, Exception):
        answer.withdraw()
    else:
        answer.reject(error)


def forward_outcome(outcome: Outcome, answer: asyncio.Future[Any]) -> None:
    """A held call's answer: what its `Later` settled with."""
    if answer.done():
        return
    kind, value = outcome
    if kind == "v":
        answer.set_result(value)
    elif kind == "e":
        answer.set_exception(value)
    else:
        answer.set_exception(RunStopped())


def never() -> asyncio.Future[Any]:
    """A request that will not be answered (its run is over)."""
    return asyncio.get_running_loop().create_future()
