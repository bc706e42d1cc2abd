"""Machine.cut_short: a pending deadline ends now (the engine side of test modifiers)."""

from _engine_helpers import T0, FakeStore, do_key, new_machine

from celld.engine import ErrorInfo, Reject, Resolve, Run, StepKey, Suspend
from celld.engine.durations import DAY_MS, HOUR_MS

SLEEP = StepKey("sleep", "nap", 1)
WAIT = StepKey("waitForEvent", "approval", 1)


def test_a_sleep_ends_now_and_stays_ended_after_a_reload():
    m = new_machine()
    assert m.step_sleep("nap", 1, T0, duration_ms="1 hour") == Suspend(T0 + HOUR_MS)
    assert m.cut_short(SLEEP, T0 + 5) == Resolve(None)
    store = FakeStore()
    store.commit(m.take_changes())
    row = store.steps[SLEEP]
    assert (row.state, row.wake_at, row.finished_at) == ("done", T0 + 5, T0 + 5)
    replayed = store.load()
    replayed.start_run(T0 + 10)
    assert replayed.step_sleep("nap", 1, T0 + 10, duration_ms="1 hour") == Resolve(None)
    assert replayed.next_wake() is None


def test_a_wait_times_out_with_its_own_timeout_error_even_with_events_buffered():
    m = new_machine()
    assert m.step_wait("approval", 1, "approve", "2 days", T0) == Suspend(
        T0 + 2 * DAY_MS, "approve"
    )
    m.send_event("other", '"x"', T0 + 1)
    decision = m.cut_short(WAIT, T0 + 2)
    assert decision == Reject(
        ErrorInfo("WorkflowTimeoutError", "Execution timed out after 172800000ms")
    )
    assert m.steps()[-1].state == "timed_out"


def test_a_pending_retry_starts_its_next_attempt_now():
    m = new_machine()
    config = {"retries": {"limit": 3, "delay": "1 minute", "backoff": "constant"}}
    run = m.step_do("charge", 1, None, config, T0)
    assert isinstance(run, Run) and run.attempt == 1
    assert m.attempt_failed(do_key("charge"), 1, ErrorInfo("Error", "no"), T0) == Suspend(
        T0 + 60_000
    )
    again = m.cut_short(do_key("charge"), T0 + 1)
    assert isinstance(again, Run) and again.attempt == 2
    assert m.next_wake() is None


def test_nothing_pending_or_a_pause_pending_gives_none_but_the_deadline_moves():
    m = new_machine()
    assert m.cut_short(SLEEP, T0) is None  # never reached
    m.step_sleep("nap", 1, T0, duration_ms="1 hour")
    m.step_do("work", 1, None, None, T0)  # an attempt in flight keeps the pause pending
    m.pause(T0)
    assert m.cut_short(SLEEP, T0 + 1) is None
    assert m.steps()[0].wake_at == T0 + 1  # due as soon as the run resumes
