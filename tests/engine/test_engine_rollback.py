"""Rollback handlers: one test per rule of `celld.engine.rollback` (pure, no I/O)."""

from __future__ import annotations

import json

from celld.engine import ErrorInfo, Reject, Run, Status, StepKey, Suspend
from celld.engine import rollback as rb
from celld.engine.lifecycle import LifecycleError
from tests.engine._engine_helpers import T0, FakeStore, do_key, new_machine

BOOM = ErrorInfo("Error", "boom")
RB = {"config": None, "dynamic": False}


def _done(m, name, value, *, rollback=RB, now=T0):
    run = m.step_do(name, 1, None, None, now, rollback=rollback)
    assert isinstance(run, Run)
    m.attempt_succeeded(do_key(name), 1, value, now)


def _saga(now=T0):
    """flight and hotel succeed with handlers; car fails for good; run() throws."""
    m = new_machine(now)
    _done(m, "flight", '"F1"')
    _done(m, "hotel", '"H1"')
    assert isinstance(m.step_do("car", 1, None, {"retries": {"limit": 0, "delay": 0}}, now), Run)
    assert isinstance(m.attempt_failed(do_key("car"), 1, BOOM, now), Reject)
    m.run_failed(BOOM, now)
    return m


def _finish_all(m, now=T0):
    order = []
    while True:
        decision = m.rollback_next(now)
        if decision is None:
            return order
        key, attempt = m.rollback_in_flight()
        order.append(key.name)
        assert m.rollback_attempt_succeeded(key, attempt, now)


# rule 1 ------------------------------------------------------------------------------------


def test_rule1_first_execution_registers_a_row_with_the_steps_seq_and_config() -> None:
    m = new_machine()
    cfg = {"retries": {"limit": 2, "delay": "1 second", "backoff": "constant"}, "timeout": 500}
    m.step_do("a", 1, None, None, T0, rollback={"config": cfg, "dynamic": False})
    changes = m.take_changes()
    rows = {row.key: row for row in changes.steps}
    registered = rows[StepKey("rollback", "a", 1)]
    assert registered.state == "registered"
    assert registered.seq == rows[do_key("a")].seq
    assert json.loads(registered.config)["limit"] == 2
    assert json.loads(registered.config)["timeout_ms"] == 500


def test_rule1_bad_rollback_config_is_refused_and_nothing_recorded() -> None:
    m = new_machine()
    m.take_changes()
    decision = m.step_do("a", 1, None, None, T0, rollback={"config": {"bogus": 1}})
    assert isinstance(decision, Reject)
    assert decision.error.message.startswith('WorkflowFatalError: Rollback config for "a"')
    assert not m.take_changes().steps


def test_rule1_a_replayed_step_registers_nothing_new() -> None:
    m = new_machine()
    _done(m, "a", "1", rollback=None)
    m.take_changes()
    m.start_run(T0 + 1)
    m.step_do("a", 1, None, None, T0 + 1, rollback=RB)  # resolved from the row
    assert StepKey("rollback", "a", 1) not in {r.key for r in m.take_changes().steps}


# rule 2 ------------------------------------------------------------------------------------


def test_rule2_reverse_start_order_including_the_failed_step() -> None:
    m = new_machine()
    _done(m, "flight", '"F1"')
    _done(m, "hotel", '"H1"')
    m.step_do("car", 1, None, {"retries": {"limit": 0, "delay": 0}}, T0, rollback=RB)
    m.attempt_failed(do_key("car"), 1, BOOM, T0)
    m.run_failed(BOOM, T0)
    assert _finish_all(m) == ["car", "hotel", "flight"]


# rule 3 ------------------------------------------------------------------------------------


def test_rule3_failure_with_handlers_reads_running_until_they_are_done() -> None:
    m = _saga()
    assert m.status is Status.RUNNING and m.rolling_back
    assert "error" not in m.status_view()
    # the forward run is over: its calls are stale
    assert m.step_do("late", 1, None, None, T0) is None


def test_rule3_without_handlers_the_instance_fails_at_once() -> None:
    m = new_machine()
    _done(m, "a", "1", rollback=None)
    m.run_failed(BOOM, T0)
    assert m.status is Status.ERRORED and not m.rolling_back
    assert "rollback" not in m.status_view()


def test_rule3_terminate_with_rollback_from_paused() -> None:
    m = new_machine()
    _done(m, "a", "1")
    m.pause(T0)
    assert m.status is Status.PAUSED
    m.terminate(T0, rollback=True)
    assert m.status is Status.RUNNING and m.rolling_back
    m.pause(T0)  # no-op while rolling back
    assert m.status is Status.RUNNING
    assert _finish_all(m) == ["a"]
    assert m.status is Status.TERMINATED
    assert m.status_view()["rollback"] == {"outcome": "complete", "error": None}


def test_rule3_engine_made_failures_roll_back_too() -> None:
    m = new_machine()
    _done(m, "a", "1")
    m.step_do("b", 1, None, None, T0)
    m.attempt_unserializable(do_key("b"), 1, T0)
    assert m.rolling_back
    _finish_all(m)
    assert m.status_view()["error"]["name"] == "WorkflowFatalError"


# rule 4 ------------------------------------------------------------------------------------


def test_rule4_plan_gives_ctx_output_and_trigger() -> None:
    m = _saga()
    m.take_changes()
    start = m.start_run(T0 + 5)
    plan = start.rollback
    assert plan["error"] == {"name": "Error", "message": "boom"}
    hotel, flight = plan["steps"]
    assert hotel["key"] == "do:1:hotel" and hotel["output"] == '"H1"'
    assert hotel["context"]["step"] == {"name": "hotel", "count": 1}
    assert hotel["context"]["attempt"] == 1
    assert hotel["context"]["config"]["retries"]["limit"] == 5
    assert hotel["stepName"] == "hotel-1"
    assert flight["key"] == "do:1:flight"
    # a step that failed has no output
    m2 = new_machine()
    m2.step_do("x", 1, None, {"retries": {"limit": 0, "delay": 0}}, T0, rollback=RB)
    m2.attempt_failed(do_key("x"), 1, BOOM, T0)
    m2.run_failed(BOOM, T0)
    assert m2.start_run(T0).rollback["steps"][0]["output"] is None


def test_rule4_retries_with_own_config_and_timeout() -> None:
    m = new_machine()
    cfg = {"retries": {"limit": 1, "delay": 1000, "backoff": "constant"}, "timeout": 50}
    _done(m, "a", "1", rollback={"config": cfg, "dynamic": False})
    m.run_failed(BOOM, T0)
    run = m.rollback_next(T0)
    assert isinstance(run, Run) and run.timeout_ms == 50 and run.will_retry
    key, attempt = m.rollback_in_flight()
    m.rollback_attempt_failed(key, attempt, None, T0, timed_out=True)
    assert m.rollback_next(T0 + 999) == Suspend(T0 + 1000)
    assert m.next_wake() == T0 + 1000
    run = m.rollback_next(T0 + 1000)
    assert run.attempt == 2 and not run.will_retry
    m.rollback_attempt_failed(key, 2, BOOM, T0 + 1000)
    assert m.status is Status.ERRORED
    assert m.status_view()["rollback"] == {"outcome": "failed", "error": BOOM.to_dict()}
    assert m.status_view()["error"] == BOOM.to_dict()


def test_rule4_nonretryable_stops_the_handlers_retries() -> None:
    m = new_machine()
    _done(m, "a", "1")
    m.run_failed(BOOM, T0)
    m.rollback_next(T0)
    key, attempt = m.rollback_in_flight()
    m.rollback_attempt_failed(key, attempt, ErrorInfo("NonRetryableError", "no"), T0)
    assert m.status is Status.ERRORED
    assert m.status_view()["rollback"]["outcome"] == "failed"


def test_rule4_a_committed_done_handler_never_runs_again_after_a_crash() -> None:
    store = FakeStore()
    m = _saga()
    m.rollback_next(T0)
    key, attempt = m.rollback_in_flight()
    assert key.name == "hotel"
    m.rollback_attempt_succeeded(key, attempt, T0)
    store.commit(m.take_changes())
    # flight's attempt starts, then the process dies before its report
    m.rollback_next(T0)
    assert m.rollback_in_flight()[0].name == "flight"
    store.commit(m.take_changes())
    reloaded = store.load()
    assert reloaded.recover(T0 + 1) and reloaded.rolling_back
    start = reloaded.start_run(T0 + 1)
    assert [s["key"] for s in start.rollback["steps"]] == ["do:1:flight"]
    assert _finish_all(reloaded, T0 + 1) == ["flight"]
    assert reloaded.status is Status.ERRORED


# rule 5 ------------------------------------------------------------------------------------


def test_rule5_first_failure_ends_the_rollback_and_skips_the_rest() -> None:
    m = _saga()
    m.rollback_next(T0)
    key, attempt = m.rollback_in_flight()
    # make hotel's handler fail for good
    m.rollback_attempt_failed(key, attempt, ErrorInfo("NonRetryableError", "refused"), T0)
    assert m.rollback_next(T0) is None
    assert m.status is Status.ERRORED
    assert m.status_view()["rollback"]["error"] == {
        "name": "NonRetryableError",
        "message": "refused",
    }
    rows = {r.key: r for r in m.steps()}
    assert rows[StepKey("rollback", "flight", 1)].state == "registered"


def test_rule5_missing_handler() -> None:
    m = _saga()
    m.rollback_next(T0)
    key, _ = m.rollback_in_flight()
    assert m.rollback_missing(key, T0)
    assert m.status_view()["rollback"] == {"outcome": "failed", "error": rb.MISSING.to_dict()}


def test_rule5_stale_reports_are_ignored() -> None:
    m = _saga()
    m.rollback_next(T0)
    key, attempt = m.rollback_in_flight()
    assert not m.rollback_attempt_succeeded(key, attempt + 1, T0)
    m.abandon_run()
    assert not m.rollback_attempt_succeeded(key, attempt, T0)


# rule 6 ------------------------------------------------------------------------------------


def test_rule6_phase_survives_reload_and_fail_keeps_the_original_error_folded() -> None:
    store = FakeStore()
    m = new_machine()
    _done(m, "a", "1")
    m.run_failed(ErrorInfo("CustomError", "nope"), T0)
    store.commit(m.take_changes())
    reloaded = store.load()
    assert reloaded.rolling_back
    reloaded.start_run(T0)
    _finish_all(reloaded)
    view = reloaded.status_view()
    assert view["status"] == "errored"
    assert view["error"] == {"name": "Error", "message": "CustomError: nope"}
    assert view["rollback"] == {"outcome": "complete", "error": None}
    store.commit(reloaded.take_changes())
    reloaded.forget_finished()
    again = store.load()
    assert again.status_view()["rollback"] == {"outcome": "complete", "error": None}


def test_rule6_trigger_for_terminate() -> None:
    m = new_machine()
    _done(m, "a", "1")
    m.terminate(T0, rollback=True)
    assert m.start_run(T0).rollback["error"] == rb.TERMINATE_TRIGGER.to_dict()


# rule 7 ------------------------------------------------------------------------------------


def test_rule7_terminate_during_a_rollback_stops_it() -> None:
    m = _saga()
    m.rollback_next(T0)
    m.terminate(T0)
    assert m.status is Status.TERMINATED
    assert m.status_view()["rollback"] == {"outcome": "failed", "error": rb.STOPPED.to_dict()}
    try:
        m.terminate(T0)
    except Exception as error:  # noqa: BLE001
        assert "cannot_terminate" in str(error)


def test_rule7_restart_forgets_the_rollback() -> None:
    store = FakeStore()
    m = _saga()
    _finish_all(m)
    store.commit(m.take_changes())
    m.restart(T0 + 1)
    store.commit(m.take_changes())
    assert "rollback" not in m.status_view()
    assert store.load().rollback_phase is None


def test_rollback_transition_needs_an_unfinished_instance() -> None:
    from celld.engine.lifecycle import LifecycleEvent, transition

    try:
        transition(Status.ERRORED, LifecycleEvent.ROLLBACK)
    except LifecycleError:
        return
    raise AssertionError("a final instance cannot begin a rollback")


def test_a_handler_retry_deadline_reaches_the_instance_row() -> None:
    """The store indexes next_wake on the instance row: a retry delay must dirty it."""
    m = new_machine()
    _done(m, "a", "1", rollback={"config": {"retries": {"limit": 1, "delay": 5000}}})
    m.run_failed(BOOM, T0)
    m.rollback_next(T0)
    key, attempt = m.rollback_in_flight()
    m.take_changes()
    m.rollback_attempt_failed(key, attempt, BOOM, T0)
    assert m.take_changes().instance is not None
    assert m.next_wake() == T0 + 5000
