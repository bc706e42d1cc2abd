"""The step-row transition table and speculative starts (`Machine.step_begin`)."""

from __future__ import annotations

import pytest

from celld.engine import ErrorInfo, Resolve, Run, Status, Suspend
from celld.engine.state import FINISHED_STATES
from celld.engine.steps import (
    INITIAL_STATE,
    STEP_TRANSITIONS,
    StepEvent,
    StepTransitionError,
    step_transition,
)
from tests.engine._engine_helpers import T0, FakeStore, do_key, new_machine

BOOM = ErrorInfo("Error", "boom")


def test_final_states_have_no_way_out() -> None:
    for (_, state, _), _target in STEP_TRANSITIONS.items():
        assert state not in FINISHED_STATES


def test_every_state_is_reachable_from_the_initial_one() -> None:
    for step_type, initial in INITIAL_STATE.items():
        seen, frontier = {initial}, [initial]
        while frontier:
            state = frontier.pop()
            for (t, s, _), target in STEP_TRANSITIONS.items():
                if t == step_type and s == state and target not in seen:
                    seen.add(target)
                    frontier.append(target)
        assert len(seen) >= 2, step_type


@pytest.mark.parametrize(
    ("step_type", "state", "event"),
    [
        ("do", "done", StepEvent.ATTEMPT),
        ("do", "failed", StepEvent.SUCCEED),
        ("do", "retrying", StepEvent.SUCCEED),
        ("sleep", "done", StepEvent.WAKE),
        ("waitForEvent", "received", StepEvent.TIME_OUT),
        ("waitForEvent", "timed_out", StepEvent.RECEIVE),
        ("sleep", "sleeping", StepEvent.RECEIVE),
    ],
)
def test_illegal_moves_raise(step_type: str, state: str, event: StepEvent) -> None:
    with pytest.raises(StepTransitionError):
        step_transition(step_type, state, event)


def test_speculative_start_is_accepted_as_attempt_one() -> None:
    m = new_machine()
    decision = m.step_begin("a", 1, 1, None, T0)
    assert isinstance(decision, Run) and decision.attempt == 1
    assert m.attempts_in_flight() == {do_key("a"): 1}
    assert m.attempt_succeeded(do_key("a"), 1, "5", T0 + 1) == Resolve("5")


def test_speculative_start_while_pausing_is_refused_and_nothing_is_recorded() -> None:
    m = new_machine()
    store = FakeStore()
    store.commit(m.take_changes())
    m.step_do("x", 1, 1, None, T0)  # an attempt in flight keeps the pause pending
    m.pause(T0)
    assert m.status is Status.WAITING_FOR_PAUSE
    refused = m.step_begin("a", 1, 2, None, T0)
    assert refused == Suspend(None)
    assert do_key("a") not in m.attempts_in_flight()
    # The callback's report (had it run) is answered with the refusal and not recorded.
    assert m.attempt_succeeded(do_key("a"), 1, "7", T0 + 1) == Suspend(None)
    store.commit(m.take_changes())
    assert do_key("a") not in store.steps
    # The pause settles when the real in-flight attempt reports.
    m.attempt_succeeded(do_key("x"), 1, "1", T0 + 2)
    assert m.status is Status.PAUSED


def test_refused_start_is_answered_once_the_pause_is_cancelled() -> None:
    m = new_machine()
    m.step_do("x", 1, 1, None, T0)
    m.pause(T0)
    m.step_begin("a", 1, 2, None, T0)
    m.attempt_failed(do_key("a"), 1, BOOM, T0)  # the refused start's report
    assert m.resume(T0 + 5) is False
    woken = dict(m.wake(T0 + 5))
    decision = woken[do_key("a")]
    assert isinstance(decision, Run) and decision.attempt == 1  # the failure was not counted


def test_speculative_start_of_a_finished_instance_is_stale() -> None:
    m = new_machine()
    m.terminate(T0)
    assert m.step_begin("a", 1, 1, None, T0) is None


def test_speculative_start_over_the_step_limit_is_refused() -> None:
    m = new_machine(step_limit=1)
    m.step_do("a", 1, 1, None, T0)
    refused = m.step_begin("b", 1, 2, None, T0)
    assert refused is not None and not isinstance(refused, Run)
    assert m.attempt_succeeded(do_key("b"), 1, "1", T0) == refused
