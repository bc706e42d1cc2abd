import pytest

from celld.engine import FINAL, TRANSITIONS, LifecycleError, LifecycleEvent, Status, transition
from celld.engine.lifecycle import OPERATOR_ACTIONS, allowed_actions

S, E = Status, LifecycleEvent

LEGAL = {
    (S.QUEUED, E.START): S.RUNNING,
    (S.RUNNING, E.START): S.RUNNING,
    (S.WAITING, E.START): S.RUNNING,
    (S.RUNNING, E.SUSPEND): S.WAITING,
    (S.WAITING, E.WAKE): S.RUNNING,
    (S.QUEUED, E.PAUSE_REQUESTED): S.WAITING_FOR_PAUSE,
    (S.RUNNING, E.PAUSE_REQUESTED): S.WAITING_FOR_PAUSE,
    (S.WAITING, E.PAUSE_REQUESTED): S.WAITING_FOR_PAUSE,
    (S.WAITING_FOR_PAUSE, E.PAUSE_SETTLED): S.PAUSED,
    (S.PAUSED, E.RESUME): S.QUEUED,
    (S.WAITING_FOR_PAUSE, E.RESUME): S.RUNNING,
    (S.QUEUED, E.TERMINATE): S.TERMINATED,
    (S.RUNNING, E.TERMINATE): S.TERMINATED,
    (S.WAITING, E.TERMINATE): S.TERMINATED,
    (S.PAUSED, E.TERMINATE): S.TERMINATED,
    (S.WAITING_FOR_PAUSE, E.TERMINATE): S.TERMINATED,
    **{(s, E.RESTART): S.QUEUED for s in Status},
    (S.RUNNING, E.COMPLETE): S.COMPLETE,
    (S.WAITING, E.COMPLETE): S.COMPLETE,
    (S.WAITING_FOR_PAUSE, E.COMPLETE): S.COMPLETE,
    (S.QUEUED, E.FAIL): S.ERRORED,
    (S.RUNNING, E.FAIL): S.ERRORED,
    (S.WAITING, E.FAIL): S.ERRORED,
    (S.WAITING_FOR_PAUSE, E.FAIL): S.ERRORED,
    # a rollback reads `running` while its handlers run, from anything not final
    (S.QUEUED, E.ROLLBACK): S.RUNNING,
    (S.RUNNING, E.ROLLBACK): S.RUNNING,
    (S.WAITING, E.ROLLBACK): S.RUNNING,
    (S.PAUSED, E.ROLLBACK): S.RUNNING,
    (S.WAITING_FOR_PAUSE, E.ROLLBACK): S.RUNNING,
}


def test_table_is_exactly_the_legal_set():
    assert TRANSITIONS == LEGAL


@pytest.mark.parametrize(("pair", "target"), sorted(LEGAL.items()))
def test_every_legal_transition(pair, target):
    assert transition(*pair) is target


@pytest.mark.parametrize(
    "pair",
    [
        (S.PAUSED, E.START),
        (S.COMPLETE, E.START),
        (S.WAITING_FOR_PAUSE, E.START),
        (S.QUEUED, E.SUSPEND),
        (S.RUNNING, E.WAKE),
        (S.PAUSED, E.PAUSE_REQUESTED),
        (S.RUNNING, E.PAUSE_SETTLED),
        (S.RUNNING, E.RESUME),
        (S.COMPLETE, E.TERMINATE),
        (S.ERRORED, E.TERMINATE),
        (S.TERMINATED, E.TERMINATE),
        (S.QUEUED, E.COMPLETE),
        (S.PAUSED, E.COMPLETE),
        (S.COMPLETE, E.FAIL),
        (S.PAUSED, E.FAIL),
    ],
)
def test_illegal_transitions_raise(pair):
    with pytest.raises(LifecycleError):
        transition(*pair)


def test_final_states_only_restart():
    for status in FINAL:
        assert [e for e in LifecycleEvent if (status, e) in TRANSITIONS] == [E.RESTART]


def test_wire_values():
    assert [s.value for s in Status] == [
        "queued", "running", "paused", "errored", "terminated", "complete", "waiting",
        "waitingForPause",
    ]  # fmt: skip


ACTION_EVENTS = {
    "pause": E.PAUSE_REQUESTED,
    "resume": E.RESUME,
    "terminate": E.TERMINATE,
    "restart": E.RESTART,
}


@pytest.mark.parametrize("status", list(Status))
def test_allowed_actions_are_what_the_table_allows(status):
    expected = tuple(a for a, event in ACTION_EVENTS.items() if (status, event) in LEGAL)
    assert allowed_actions(status) == expected
    assert allowed_actions(status.value) == expected  # the wire value answers the same
    assert OPERATOR_ACTIONS == ACTION_EVENTS


def test_allowed_actions_by_status():
    assert allowed_actions(S.COMPLETE) == ("restart",)  # no resume, no terminate
    assert allowed_actions(S.TERMINATED) == ("restart",)
    assert allowed_actions(S.PAUSED) == ("resume", "terminate", "restart")
    assert allowed_actions(S.WAITING) == ("pause", "terminate", "restart")
    assert allowed_actions(S.WAITING_FOR_PAUSE) == ("resume", "terminate", "restart")


def test_a_rollback_in_progress_can_only_be_terminated_or_restarted():
    assert allowed_actions(S.RUNNING, rolling_back=True) == ("terminate", "restart")


def test_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="unknown"):
        allowed_actions("unknown")
