"""Status, idle/stall, pause/resume, terminate, restart, retention (rules 10-13)."""

import json

import pytest
from _engine_helpers import T0, FakeStore, do_key, new_machine

from celld.engine import (
    CannotRestartError,
    CannotTerminateError,
    ErrorInfo,
    Fail,
    InvalidIdError,
    LifecycleError,
    Machine,
    Resolve,
    Run,
    Status,
    StepKey,
    Suspend,
)
from celld.engine.durations import DAY_MS

BOOM = ErrorInfo("Error", "boom")


# rule 10: status ----------------------------------------------------------------------------


def test_create_is_queued_and_changes_include_the_new_instance():
    m = Machine.create("wf", "id-1", '{"a":1}', T0, retention=None, step_limit=10)
    assert m.status_view() == {"status": "queued"}
    changes = m.take_changes()
    assert changes.created and changes.instance.id == "id-1"
    assert changes.instance.params == '{"a":1}' and changes.instance.created_at == T0
    assert not m.take_changes()


def test_create_validates():
    with pytest.raises(InvalidIdError):
        Machine.create("wf", "bad id!", "{}", T0)


def test_start_run_sets_running_and_started_at_once():
    m = new_machine(start=False)
    start = m.start_run(T0 + 5)
    assert (start.generation, start.journal, start.step_limit) == (0, {}, 10_000)
    assert m.status is Status.RUNNING and m.state.started_at == T0 + 5
    m.start_run(T0 + 9)
    assert m.state.started_at == T0 + 5


def test_waiting_when_idle_with_pending_waits_only():
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    m.step_sleep("nap", 1, T0, duration_ms=1000)
    m.idle(T0)
    assert m.status is Status.RUNNING  # an attempt is in flight
    m.attempt_succeeded(do_key("a"), 1, "1", T0)
    m.idle(T0)
    assert m.status_view() == {"status": "waiting"}
    m.wake(T0 + 1000)
    assert m.status is Status.RUNNING


def test_retry_delay_reports_waiting():
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    m.attempt_failed(do_key("a"), 1, BOOM, T0)
    m.idle(T0)
    assert m.status is Status.WAITING
    [(_, d)] = m.wake(T0 + 10_000)
    assert isinstance(d, Run) and m.status is Status.RUNNING


def test_complete_and_errored_views():
    m = new_machine()
    m.run_succeeded('{"done":true}', T0 + 10)
    assert m.status_view() == {"status": "complete", "output": '{"done":true}'}
    assert (m.state.finished_at, m.state.expires_at) == (T0 + 10, T0 + 10 + 30 * DAY_MS)

    m = new_machine()
    m.run_failed(ErrorInfo("CustomError", "x"), T0)
    assert m.status_view() == {
        "status": "errored",
        "error": {"name": "Error", "message": "CustomError: x"},
    }


def test_run_results_after_final_are_ignored():
    m = new_machine()
    m.terminate(T0)
    m.run_succeeded("1", T0)
    m.run_failed(BOOM, T0)
    assert m.status_view() == {"status": "terminated"}
    assert m.step_do("a", 1, 1, None, T0) is None


def test_start_run_on_paused_or_final_is_illegal():
    m = new_machine()
    m.pause(T0)
    with pytest.raises(LifecycleError):
        m.start_run(T0)


# stall rule ----------------------------------------------------------------------------------


def test_stall_rule():
    m = new_machine()
    m.idle(T0)
    assert m.stall_deadline() == T0 + 60_000
    assert m.check_stalled(T0 + 59_999) is None
    d = m.check_stalled(T0 + 60_000)
    assert isinstance(d, Fail) and d.error.message.startswith("run() has been pending for 60 s")
    assert m.status is Status.ERRORED


def test_no_stall_while_waiting_or_running_a_step_and_activity_resets_it():
    m = new_machine()
    m.step_sleep("nap", 1, T0, duration_ms=DAY_MS)
    m.idle(T0)
    assert m.check_stalled(T0 + DAY_MS - 1) is None
    m2 = new_machine()
    m2.idle(T0)
    m2.step_do("a", 1, 1, None, T0 + 30_000)  # JS did something
    assert m2.check_stalled(T0 + 60_000) is None
    m2.attempt_succeeded(do_key("a"), 1, "1", T0 + 30_000)
    m2.idle(T0 + 40_000)
    assert m2.check_stalled(T0 + 99_999) is None
    assert isinstance(m2.check_stalled(T0 + 100_000), Fail)


# rule 11: pause / resume ----------------------------------------------------------------------


def test_pause_idle_instance_and_resume_shifts_deadlines():
    store = FakeStore()
    m = new_machine()
    m.step_sleep("nap", 1, T0, duration_ms=10_000)
    m.step_wait("w", 1, "t", "1 minute", T0)
    m.idle(T0)
    m.pause(T0 + 4000)
    assert m.status_view() == {"status": "paused"} and m.state.paused_at == T0 + 4000
    assert m.pending() == [] and m.next_wake() is None
    assert m.wake(T0 + 20_000) == []
    m.send_event("t", '"kept"', T0 + 5000)  # stored while paused
    store.commit(m.take_changes())

    assert m.resume(T0 + 9000) is True
    assert m.status is Status.QUEUED
    wakes = sorted(r.wake_at for r in m.steps())
    assert wakes == [T0 + 15_000, T0 + 65_000]
    store.commit(m.take_changes())

    m2 = store.load()
    m2.start_run(T0 + 9000)
    assert m2.step_sleep("nap", 1, T0 + 9000, duration_ms=10_000) == Suspend(T0 + 15_000)
    d = m2.step_wait("w", 1, "t", "1 minute", T0 + 9000)
    assert isinstance(d, Resolve) and json.loads(d.value)["payload"] == '"kept"'


def test_pause_with_attempt_in_flight_waits_for_it():
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    m.pause(T0 + 1)
    assert m.status is Status.WAITING_FOR_PAUSE
    m.pause(T0 + 2)  # no-op
    # no new attempt starts while pausing
    assert m.step_do("b", 1, 2, None, T0 + 2) == Suspend(None)
    assert [r.name for r in m.steps()] == ["a"]
    m.attempt_succeeded(do_key("a"), 1, '"r"', T0 + 5)
    assert m.status is Status.PAUSED and m.state.paused_at == T0 + 5
    assert m.take_changes().steps[0].state == "done"  # the result was recorded


def test_resume_while_waiting_for_pause_cancels_and_wake_answers_parked_calls():
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    m.pause(T0)
    assert m.step_do("b", 1, 2, None, T0) == Suspend(None)
    assert m.resume(T0 + 1) is False
    assert m.status is Status.RUNNING
    [(key, d)] = m.wake(T0 + 1)
    assert key == do_key("b") and isinstance(d, Run)
    assert m.in_flight() == 2


def test_pause_during_retry_keeps_attempt_count():
    store = FakeStore()
    m = new_machine()
    m.step_do("a", 1, 1, {"retries": {"limit": 3, "delay": 1000}}, T0)
    m.attempt_failed(do_key("a"), 1, BOOM, T0)
    m.idle(T0)
    m.pause(T0 + 100)
    m.resume(T0 + 10_100)
    store.commit(m.take_changes())
    m2 = store.load()
    m2.start_run(T0 + 10_100)
    assert m2.step_do("a", 1, 1, None, T0 + 10_100) == Suspend(T0 + 11_000)
    [(_, d)] = m2.wake(T0 + 11_000)
    assert d.attempt == 2


def test_pause_queued_and_noops():
    m = new_machine(start=False)
    m.pause(T0)
    assert m.status is Status.PAUSED
    assert m.resume(T0 + 1) is True and m.status is Status.QUEUED
    assert m.resume(T0 + 2) is False
    m.start_run(T0)
    m.run_succeeded("1", T0)
    m.pause(T0)
    assert m.resume(T0) is False
    assert m.status is Status.COMPLETE


# rule 12: terminate / restart -----------------------------------------------------------------


def test_terminate():
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    m.terminate(T0 + 1)
    assert m.status_view() == {"status": "terminated"}
    assert m.state.expires_at == T0 + 1 + 30 * DAY_MS
    assert m.attempt_succeeded(do_key("a"), 1, "1", T0 + 2) is None
    with pytest.raises(CannotTerminateError):
        m.terminate(T0 + 3)


def test_terminate_paused():
    m = new_machine()
    m.pause(T0)
    m.terminate(T0)
    assert m.status is Status.TERMINATED


def _three_steps(store):
    m = new_machine()
    for i, name in enumerate(("a", "b", "c"), start=1):
        m.step_do(name, 1, i, None, T0)
        m.attempt_succeeded(do_key(name), 1, f'"{name}"', T0)
    m.step_wait("w", 1, "t", None, T0)
    m.send_event("t", '"e1"', T0)
    m.send_event("t", '"e2"', T0)
    m.run_succeeded('"out"', T0)
    store.commit(m.take_changes())
    return m


def test_restart_wipes_everything_and_bumps_generation():
    store = FakeStore()
    m = _three_steps(store)
    m.restart(T0 + 5)
    assert m.status_view() == {"status": "queued"}
    assert m.generation == 1 and m.steps() == [] and m.events() == []
    assert m.state.output is None and m.state.finished_at is None
    changes = m.take_changes()
    assert changes.wiped
    store.commit(changes)
    assert store.steps == {} and store.events == {}
    assert store.load().start_run(T0 + 6).generation == 1


def test_restart_from_keeps_earlier_steps():
    store = FakeStore()
    m = _three_steps(store)
    m.restart(T0, {"name": "b"})
    assert [r.name for r in m.steps()] == ["a"]
    changes = m.take_changes()
    assert set(changes.deleted_steps) == {
        do_key("b"),
        do_key("c"),
        StepKey("waitForEvent", "w", 1),
    }
    # the event the wiped wait consumed is dropped, the unconsumed one stays buffered
    assert changes.deleted_events == [1]
    store.commit(changes)
    m2 = store.load()
    assert m2.start_run(T0).journal == {"do:1:a": ("value", '"a"')}
    assert [e.payload for e in m2.events()] == ['"e2"']


def test_restart_from_by_type_and_count():
    m = new_machine()
    m.step_sleep("x", 1, T0, duration_ms=0)
    m.step_do("x", 1, 1, None, T0)
    m.attempt_succeeded(do_key("x"), 1, "1", T0)
    m.restart(T0, {"name": "x", "type": "sleep", "count": 1})
    assert m.steps() == []


def test_restart_from_unknown_step():
    m = new_machine()
    with pytest.raises(CannotRestartError) as info:
        m.restart(T0, {"name": "nope"})
    assert str(info.value) == '(instance.cannot_restart) Step "nope" not found in execution history'
    assert m.status is Status.RUNNING and m.generation == 0


# rule 13: retention ---------------------------------------------------------------------------


def test_retention():
    m = new_machine(retention={"successRetention": "1 day", "errorRetention": "2 days"})
    m.run_succeeded("1", T0)
    assert m.state.expires_at == T0 + DAY_MS
    assert not m.is_expired(T0 + DAY_MS - 1) and m.is_expired(T0 + DAY_MS)

    m = new_machine(retention={"successRetention": "1 day", "errorRetention": "2 days"})
    m.run_failed(BOOM, T0)
    assert m.state.expires_at == T0 + 2 * DAY_MS
    m.restart(T0)
    assert m.state.expires_at is None and not m.is_expired(T0 + 10 * DAY_MS)


def test_recover_settles_a_pause_whose_attempts_died_with_the_process():
    store = FakeStore()
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    m.pause(T0)
    store.commit(m.take_changes())
    m2 = store.load()
    assert m2.status is Status.WAITING_FOR_PAUSE
    assert m2.recover(T0 + 5) is False
    assert m2.status is Status.PAUSED and m2.state.paused_at == T0 + 5
    assert store.load().status is Status.WAITING_FOR_PAUSE  # not committed yet
    store.commit(m2.take_changes())
    assert store.load().recover(T0 + 6) is False

    running = new_machine()
    assert running.recover(T0) is True
    done = new_machine()
    done.run_succeeded("1", T0)
    assert done.recover(T0) is False
