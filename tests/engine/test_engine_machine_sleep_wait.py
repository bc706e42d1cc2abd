"""step.sleep / sleepUntil / waitForEvent / sendEvent (rules 8, 9)."""

import json

import pytest
from _engine_helpers import T0, FakeStore, new_machine

from celld.engine import (
    CannotSendEventError,
    ErrorInfo,
    InvalidEventTypeError,
    PayloadTooLargeError,
    Reject,
    Resolve,
    Status,
    StepKey,
    Suspend,
)
from celld.engine.durations import DAY_MS, HOUR_MS

SLEEP = StepKey("sleep", "nap", 1)
WAIT = StepKey("waitForEvent", "approval", 1)


def ev(payload: str, type_: str, ts: int) -> Resolve:
    return Resolve(json.dumps({"payload": payload, "type": type_, "timestamp": ts},
                              separators=(",", ":")))  # fmt: skip


# rule 8: sleep ------------------------------------------------------------------------------


def test_sleep_stores_deadline_and_suspends():
    m = new_machine()
    assert m.step_sleep("nap", 1, T0, duration_ms="1 second") == Suspend(T0 + 1000)
    [row] = m.take_changes().steps
    assert (row.state, row.wake_at) == ("sleeping", T0 + 1000)
    assert m.next_wake() == T0 + 1000
    assert m.wake(T0 + 999) == []
    assert m.wake(T0 + 1000) == [(SLEEP, Resolve(None))]
    assert m.take_changes().steps[0].state == "done"
    assert m.next_wake() is None


def test_sleep_replay_after_deadline_is_finished_in_journal():
    store = FakeStore()
    m = new_machine()
    m.step_sleep("nap", 1, T0, duration_ms=5000)
    store.commit(m.take_changes())
    early = store.load()
    assert early.start_run(T0 + 100).journal == {}
    # a replay with a different duration does not move the deadline
    assert early.step_sleep("nap", 1, T0 + 100, duration_ms=60_000) == Suspend(T0 + 5000)
    late = store.load()
    assert late.start_run(T0 + 5000).journal == {"sleep:1:nap": ("value", None)}
    assert late.take_changes().steps[0].state == "done"


def test_sleep_zero_resolves_at_once_and_is_recorded():
    m = new_machine()
    assert m.step_sleep("nap", 1, T0, duration_ms=0) == Resolve(None)
    assert m.take_changes().steps[0].state == "done"


def test_sleep_until():
    m = new_machine()
    assert m.step_sleep("nap", 1, T0, until_ms=T0 + 7000) == Suspend(T0 + 7000)
    assert m.step_sleep("nap", 2, T0, until_ms=T0) == Resolve(None)


def test_sleep_until_past_is_catchable_reject():
    m = new_machine()
    d = m.step_sleep("nap", 1, T0, until_ms=T0 - 1)
    assert d == Reject(
        ErrorInfo("Error", "You can't sleep until a time in the past, time-traveler")
    )
    assert m.status is Status.RUNNING


@pytest.mark.parametrize("kwargs", [{"duration_ms": "366 days"}, {"until_ms": T0 + 366 * DAY_MS}])
def test_sleep_longer_than_365_days_is_fatal(kwargs):
    m = new_machine()
    d = m.step_sleep("nap", 1, T0, **kwargs)
    assert isinstance(d, Reject) and "365 days" in d.error.message


def test_sleep_365_days_is_fine():
    m = new_machine()
    assert m.step_sleep("nap", 1, T0, duration_ms="1 year") == Suspend(T0 + 365 * DAY_MS)


def test_bad_sleep_duration_is_fatal():
    m = new_machine()
    d = m.step_sleep("nap", 1, T0, duration_ms="10s")
    assert isinstance(d, Reject) and "'10s'" in d.error.message


# rule 9: waitForEvent ------------------------------------------------------------------------


def test_wait_default_timeout_and_event_delivery():
    m = new_machine()
    assert m.step_wait("approval", 1, "approve", None, T0) == Suspend(T0 + 24 * HOUR_MS, "approve")
    m.idle(T0)
    assert m.status is Status.WAITING
    assert m.send_event("other", '"x"', T0 + 1) == []
    out = m.send_event("approve", '{"by":"alice"}', T0 + 2)
    assert out == [(WAIT, ev('{"by":"alice"}', "approve", T0 + 2))]
    assert m.status is Status.RUNNING
    changes = m.take_changes()
    [row] = changes.steps
    assert row.state == "received"
    consumed = {e.seq: e.consumed_by for e in changes.events}
    assert consumed == {1: None, 2: WAIT}


def test_event_buffered_before_wait_oldest_first():
    m = new_machine()
    m.send_event("approve", '"first"', T0 + 1)
    m.send_event("approve", '"second"', T0 + 2)
    assert m.step_wait("approval", 1, "approve", "1 hour", T0 + 3) == ev(
        '"first"', "approve", T0 + 1
    )
    assert m.step_wait("approval", 2, "approve", "1 hour", T0 + 3) == ev(
        '"second"', "approve", T0 + 2
    )
    assert isinstance(m.step_wait("approval", 3, "approve", "1 hour", T0 + 3), Suspend)


def test_oldest_pending_wait_gets_the_event():
    m = new_machine()
    m.step_wait("a", 1, "t", "1 hour", T0)
    m.step_wait("b", 1, "t", "1 hour", T0)
    [(key, _)] = m.send_event("t", "1", T0 + 1)
    assert key.name == "a"
    [(key, _)] = m.send_event("t", "2", T0 + 2)
    assert key.name == "b"


def test_wait_timeout_is_recorded_and_rethrown_even_if_event_arrives_later():
    store = FakeStore()
    m = new_machine()
    m.step_wait("approval", 1, "approve", "2 seconds", T0)
    timeout = ErrorInfo("WorkflowTimeoutError", "Execution timed out after 2000ms")
    assert m.wake(T0 + 2000) == [(WAIT, Reject(timeout))]
    m.send_event("approve", '"late"', T0 + 3000)
    store.commit(m.take_changes())
    m2 = store.load()
    assert m2.start_run(T0 + 4000).journal == {"waitForEvent:1:approval": ("error", timeout)}
    assert m2.step_wait("approval", 1, "approve", "2 seconds", T0 + 4000) == Reject(timeout)
    # the late event stays buffered for a later wait
    assert m2.step_wait("approval", 2, "approve", None, T0 + 4000) == ev(
        '"late"', "approve", T0 + 3000
    )


def test_wait_deadline_passed_while_hibernated_times_out_durably_at_start():
    store = FakeStore()
    m = new_machine()
    m.step_wait("approval", 1, "approve", "1 second", T0)
    store.commit(m.take_changes())
    m2 = store.load()
    journal = m2.start_run(T0 + 5000).journal
    assert journal["waitForEvent:1:approval"].kind == "error"
    assert m2.take_changes().steps[0].state == "timed_out"


def test_event_sent_before_deadline_wins_over_timeout_on_late_replay():
    store = FakeStore()
    m = new_machine()
    m.step_wait("approval", 1, "approve", "1 second", T0)
    store.commit(m.take_changes())
    cold = store.load()  # hibernated: no pending waits in memory
    assert cold.send_event("approve", '"ok"', T0 + 500) == []
    assert cold.waits_for("approve")
    store.commit(cold.take_changes())
    m2 = store.load()
    journal = m2.start_run(T0 + 5000).journal
    assert journal["waitForEvent:1:approval"] == ("value", ev('"ok"', "approve", T0 + 500).value)


def test_event_after_deadline_is_not_delivered_to_that_wait():
    m = new_machine()
    m.step_wait("approval", 1, "approve", "1 second", T0)
    assert m.send_event("approve", '"late"', T0 + 1000) == []
    [(key, d)] = m.wake(T0 + 1000)
    assert isinstance(d, Reject)


@pytest.mark.parametrize("timeout", [999, "2 years", "soon", 0])
def test_wait_timeout_range_is_fatal_config_error(timeout):
    m = new_machine()
    d = m.step_wait("approval", 1, "approve", timeout, T0)
    assert isinstance(d, Reject)
    assert d.error.message.startswith(
        'WorkflowFatalError: Step config for "approval" is in a invalid format.'
    )


def test_wait_timeout_bounds_accepted():
    m = new_machine()
    assert m.step_wait("a", 1, "t", "1 second", T0) == Suspend(T0 + 1000, "t")
    assert m.step_wait("b", 1, "t", "365 days", T0) == Suspend(T0 + 365 * DAY_MS, "t")


def test_wait_invalid_type_is_fatal():
    m = new_machine()
    assert isinstance(m.step_wait("a", 1, "bad type!", None, T0), Reject)


def test_send_event_validation():
    m = new_machine()
    with pytest.raises(InvalidEventTypeError):
        m.send_event("a.b", "{}", T0)
    with pytest.raises(PayloadTooLargeError):
        m.send_event("t", '"' + "x" * 1_048_576 + '"', T0)


@pytest.mark.parametrize("final", ["complete", "errored", "terminated"])
def test_events_to_final_instance_refused_not_stored(final):
    """Production documents that sendEvent throws once the instance is no longer running;
    celld refuses it for every final status, naming the status, and stores nothing."""
    m = new_machine()
    if final == "complete":
        m.run_succeeded('"done"', T0)
    elif final == "errored":
        m.run_failed(ErrorInfo("Error", "boom"), T0)
    else:
        m.terminate(T0)
    m.take_changes()
    with pytest.raises(CannotSendEventError) as raised:
        m.send_event("t", "1", T0)
    assert raised.value.message == (
        f"(instance.cannot_send_event) Cannot send event to instance since it is {final}"
    )
    assert not m.take_changes().events
    assert m.status.value == final


def test_events_to_paused_and_waiting_instances_accepted():
    m = new_machine()
    assert isinstance(m.step_wait("w", 1, "other", None, T0), Suspend)
    m.idle(T0)
    assert m.status is Status.WAITING
    m.send_event("t", "1", T0)  # waiting: accepted
    m.pause(T0)
    m.send_event("t", "2", T0)  # paused: accepted, kept for the next run
    assert len(m.take_changes().events) == 2


def test_events_while_queued_are_stored():
    m = new_machine(start=False)
    m.send_event("t", "1", T0)
    assert len(m.take_changes().events) == 1
    m.start_run(T0 + 1)
    assert m.step_wait("w", 1, "t", None, T0 + 1) == ev("1", "t", T0)


def test_abandoned_run_buffers_events_for_the_next_replay():
    m = new_machine()
    assert isinstance(m.step_wait("approval", 1, "go", None, T0), Suspend)
    m.abandon_run()  # the isolate hibernated: nobody listens for this run any more
    assert m.send_event("go", '"yes"', T0 + 1) == []
    assert m.waits_for("go")
    m.take_changes()
    start = m.start_run(T0 + 2)
    assert str(WAIT) not in start.journal
    assert m.step_wait("approval", 1, "go", None, T0 + 2) == ev('"yes"', "go", T0 + 1)
