"""step.do: replay, identity, new steps, limits, success, failure, retries (rules 1-7)."""

from _engine_helpers import T0, FakeStore, do_key, new_machine

from celld.engine import ErrorInfo, Fail, Reject, Resolve, Run, Status, StepKey, Suspend
from celld.engine.errors import FATAL_ERROR

BOOM = ErrorInfo("Error", "boom")


def run_to_done(m, name, value='"v"', count=1, ordinal=None, config=None, now=T0):
    d = m.step_do(name, count, ordinal, config, now)
    assert isinstance(d, Run)
    return m.attempt_succeeded(StepKey("do", name, count), d.attempt, value, now)


# rule 1: replay ----------------------------------------------------------------------------


def test_done_step_replays_value_without_running():
    store = FakeStore()
    m = new_machine()
    assert run_to_done(m, "a", '{"x":1}') == Resolve('{"x":1}')
    store.commit(m.take_changes())
    m2 = store.load()
    start = m2.start_run(T0 + 5)
    assert start.journal == {"do:1:a": ("value", '{"x":1}')}
    assert m2.step_do("a", 1, 1, None, T0 + 5) == Resolve('{"x":1}')
    assert m2.in_flight() == 0


def test_failed_step_rethrows_recorded_error():
    store = FakeStore()
    m = new_machine()
    d = m.step_do("a", 1, 1, {"retries": {"limit": 0, "delay": 0}}, T0)
    assert m.attempt_failed(do_key("a"), d.attempt, BOOM, T0) == Reject(BOOM)
    store.commit(m.take_changes())
    m2 = store.load()
    assert m2.start_run(T0).journal == {"do:1:a": ("error", BOOM)}
    assert m2.step_do("a", 1, 1, None, T0) == Reject(BOOM)


def test_config_fixed_at_first_execution():
    store = FakeStore()
    m = new_machine()
    d = m.step_do("a", 1, 1, {"retries": {"limit": 1, "delay": 1000, "backoff": "constant"}}, T0)
    assert d.will_retry
    store.commit(m.take_changes())  # crash with the attempt in flight
    m2 = store.load()
    m2.start_run(T0 + 10)
    d2 = m2.step_do("a", 1, 1, {"retries": {"limit": 0, "delay": 5}}, T0 + 10)
    assert d2.context["config"]["retries"] == {"limit": 1, "delay": 1000, "backoff": "constant"}
    assert d2.will_retry
    assert m2.attempt_failed(do_key("a"), d2.attempt, BOOM, T0 + 10) == Suspend(T0 + 1010)


# rule 2: identity ---------------------------------------------------------------------------


def test_identity_by_type_name_count():
    m = new_machine()
    assert run_to_done(m, "x", '"do1"') == Resolve('"do1"')
    assert run_to_done(m, "x", '"do2"', count=2, ordinal=2) == Resolve('"do2"')
    assert m.step_sleep("x", 1, T0, duration_ms=0) == Resolve(None)
    assert m.step_do("x", 1, 3, None, T0) == Resolve('"do1"')
    assert m.step_do("x", 2, 4, None, T0) == Resolve('"do2"')
    keys = [str(r.key) for r in m.steps()]
    assert keys == ["do:1:x", "do:2:x", "sleep:1:x"]
    assert [r.seq for r in m.steps()] == [1, 2, 3]


def test_step_key_string_form_round_trips():
    key = StepKey("waitForEvent", "a:b:c", 3)
    assert str(key) == "waitForEvent:3:a:b:c"
    assert StepKey.parse(str(key)) == key


# rule 3: new steps -------------------------------------------------------------------------


def test_new_step_runs_attempt_one_with_context():
    m = new_machine()
    d = m.step_do("fetch", 1, 1, {"retries": {"limit": 2, "delay": "1 second"}}, T0)
    assert d == Run(
        attempt=1,
        context={
            "step": {"name": "fetch", "count": 1},
            "attempt": 1,
            "config": {
                "retries": {"limit": 2, "delay": "1 second", "backoff": "exponential"},
                "timeout": "10 minutes",
            },
        },
        timeout_ms=600_000,
        will_retry=True,
    )
    changes = m.take_changes()
    assert [(r.state, r.seq, r.attempts) for r in changes.steps] == [("running", 1, 0)]
    assert m.in_flight() == 1
    assert m.attempts_in_flight() == {do_key("fetch"): 1}


def test_invalid_step_name_is_thrown_into_run():
    # as wrangler dev: a catchable error, folded as it crosses RPC ("WorkflowFatalError: ...")
    m = new_machine()
    d = m.step_do("x" * 257, 1, 1, None, T0)
    assert d == Reject(
        ErrorInfo(
            "Error",
            f'{FATAL_ERROR}: Step name "{"x" * 257}" exceeds max length (256 chars) or invalid '
            "characters found",
        )
    )
    assert m.status is Status.RUNNING
    assert m.steps() == []


def test_invalid_config_is_thrown_into_run():
    m = new_machine()
    d = m.step_do("s", 1, 1, {"retries": {"limit": 1}}, T0)
    assert isinstance(d, Reject)
    assert d.error.message.startswith('WorkflowFatalError: Step config for "s" is in a invalid')
    assert m.status is Status.RUNNING
    assert m.steps() == []


def test_running_row_left_by_crash_reruns_same_attempt():
    store = FakeStore()
    m = new_machine()
    d = m.step_do("a", 1, 1, None, T0)
    m.attempt_failed(do_key("a"), d.attempt, BOOM, T0, delay_ms=0)  # -> Run(2) at once
    store.commit(m.take_changes())  # crash during attempt 2
    m2 = store.load()
    m2.start_run(T0 + 1)
    assert m2.step_do("a", 1, 1, None, T0 + 1).attempt == 2
    store.commit(m2.take_changes())
    m3 = store.load()
    m3.start_run(T0 + 2)
    assert m3.step_do("a", 1, 1, None, T0 + 2).attempt == 2


# rule 4: step limit -------------------------------------------------------------------------


def test_step_limit_counts_do_calls_including_replayed():
    m = new_machine(step_limit=2)
    run_to_done(m, "a", ordinal=1)
    assert m.step_sleep("s", 1, T0, duration_ms=0) == Resolve(None)  # sleeps don't count
    assert isinstance(m.step_do("b", 1, 2, None, T0), Run)
    d = m.step_do("c", 1, 3, None, T0)
    assert d == Reject(
        ErrorInfo(
            "Error",
            f"{FATAL_ERROR}: The limit of 2 steps has been reached. "
            "This limit can be changed in your worker configuration.",
        )
    )
    assert m.status is Status.RUNNING  # run() may catch it; uncaught, run_failed() errors


def test_step_limit_with_machine_counting():
    m = new_machine(step_limit=1)
    run_to_done(m, "a")
    assert isinstance(m.step_do("a", 2, None, None, T0), Reject)


# rule 5: success ----------------------------------------------------------------------------


def test_oversized_value_is_a_retried_failure():
    m = new_machine()
    d = m.step_do("big", 1, 1, {"retries": {"limit": 1, "delay": 0}}, T0)
    d2 = m.attempt_succeeded(do_key("big"), d.attempt, '"' + "x" * 1_048_576 + '"', T0)
    assert isinstance(d2, Run) and d2.attempt == 2
    d3 = m.attempt_succeeded(do_key("big"), 2, '"' + "x" * 1_048_576 + '"', T0)
    assert d3 == Reject(
        ErrorInfo(
            "WorkflowInternalError",
            "Step big-1 output is too large. Maximum allowed size is 1MiB.",
        )
    )


def test_success_records_done():
    m = new_machine()
    run_to_done(m, "a", '"ok"')
    [row] = m.take_changes().steps
    assert (row.state, row.value, row.finished_at) == ("done", '"ok"', T0)


# rule 6: failures ---------------------------------------------------------------------------


def test_non_retryable_fails_at_once_and_replays():
    store = FakeStore()
    m = new_machine()
    d = m.step_do("a", 1, 1, None, T0)
    err = ErrorInfo("NonRetryableError", "bad input")
    assert m.attempt_failed(do_key("a"), d.attempt, err, T0) == Reject(err)
    store.commit(m.take_changes())
    m2 = store.load()
    m2.start_run(T0)
    assert m2.step_do("a", 1, 1, None, T0) == Reject(err)


def test_non_retryable_flag_and_prefixed_message():
    m = new_machine()
    d = m.step_do("a", 1, 1, None, T0)
    assert isinstance(m.attempt_failed(do_key("a"), d.attempt, BOOM, T0, nonretryable=True), Reject)
    d = m.step_do("b", 1, 2, None, T0)
    err = ErrorInfo("Error", "NonRetryableError: nope")
    assert m.attempt_failed(do_key("b"), d.attempt, err, T0) == Reject(err)


def test_retries_with_exponential_backoff_then_exhausted():
    m = new_machine()
    key = do_key("a")
    now = T0
    d = m.step_do("a", 1, 1, {"retries": {"limit": 3, "delay": 1000}}, now)
    waits = []
    for attempt in (1, 2, 3):
        assert d.attempt == attempt and d.will_retry
        s = m.attempt_failed(key, attempt, ErrorInfo("Error", f"fail {attempt}"), now)
        assert isinstance(s, Suspend)
        waits.append(s.until - now)
        assert m.take_changes().steps[0].state == "retrying"
        now = s.until
        [(k, d)] = m.wake(now)
        assert k == key
    assert waits == [1000, 2000, 4000]
    assert d.attempt == 4 and not d.will_retry
    last = ErrorInfo("Error", "fail 4")
    assert m.attempt_failed(key, 4, last, now) == Reject(last)
    [row] = m.take_changes().steps
    assert (row.state, row.attempts, row.error) == ("failed", 4, last)


def test_linear_and_constant_backoff():
    for backoff, expected in (("linear", [500, 1000, 1500]), ("constant", [500, 500, 500])):
        m = new_machine()
        cfg = {"retries": {"limit": 3, "delay": 500, "backoff": backoff}}
        d = m.step_do("a", 1, 1, cfg, T0)
        got = []
        for attempt in (1, 2, 3):
            s = m.attempt_failed(do_key("a"), attempt, BOOM, T0)
            got.append(s.until - T0)
            [(_, d)] = m.wake(s.until)
        assert got == expected


def test_zero_delay_retries_immediately():
    m = new_machine()
    m.step_do("a", 1, 1, {"retries": {"limit": 1, "delay": 0}}, T0)
    d = m.attempt_failed(do_key("a"), 1, BOOM, T0)
    assert isinstance(d, Run) and d.attempt == 2 and not d.will_retry


def test_dynamic_delay_goes_through_backoff():
    m = new_machine()
    cfg = {"retries": {"limit": 3, "delay": {"$fn": True}}}
    d = m.step_do("a", 1, 1, cfg, T0)
    assert "delay" not in d.context["config"]["retries"]
    assert m.attempt_failed(do_key("a"), 1, BOOM, T0, delay_ms="3 seconds") == Suspend(T0 + 3000)
    m.wake(T0 + 3000)
    now = T0 + 3000
    # exponential by default: 2 * 1000
    assert m.attempt_failed(do_key("a"), 2, BOOM, now, delay_ms=1000) == Suspend(now + 2000)


def test_dynamic_delay_errors_fail_without_retry():
    cases = [
        ({"delay_error": ErrorInfo("Error", "nope")}, "threw an error: nope"),
        ({"delay_timed_out": True}, "did not return within 5 seconds"),
        ({"delay_ms": "soon"}, "returned an invalid delay value"),
        ({"delay_ms": -5}, "returned an invalid delay value"),
    ]
    for kwargs, text in cases:
        m = new_machine()
        m.step_do("a", 1, 1, {"retries": {"limit": 3, "delay": {"$fn": True}}}, T0)
        d = m.attempt_failed(do_key("a"), 1, BOOM, T0, **kwargs)
        assert isinstance(d, Reject)
        assert d.error.name == "NonRetryableDelayError"
        assert d.error.message.startswith('The delay function for step "a-1" ')
        assert text in d.error.message


def test_timeout_is_a_failed_attempt():
    m = new_machine()
    d = m.step_do("a", 1, 1, {"retries": {"limit": 0, "delay": 0}, "timeout": "2 seconds"}, T0)
    assert d.timeout_ms == 2000
    r = m.attempt_failed(do_key("a"), 1, None, T0 + 2000, timed_out=True)
    assert r == Reject(ErrorInfo("WorkflowTimeoutError", "Execution timed out after 2000ms"))
    # the callback finishing later is stale
    assert m.attempt_succeeded(do_key("a"), 1, '"late"', T0 + 3000) is None


def test_unserializable_is_fatal():
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    d = m.attempt_unserializable(do_key("a"), 1, T0)
    assert d == Fail(
        ErrorInfo(
            FATAL_ERROR,
            "The execution of the Workflow instance was terminated, "
            'as the step "a" returned a value which is not serialisable',
        )
    )
    assert m.status is Status.ERRORED


def test_stale_reports_are_ignored():
    m = new_machine()
    m.step_do("a", 1, 1, None, T0)
    assert m.attempt_succeeded(do_key("a"), 2, '"x"', T0) is None
    assert m.attempt_failed(do_key("zz"), 1, BOOM, T0) is None


# rule 7: retry after crash / hibernation ------------------------------------------------------


def test_retry_deadline_survives_replay():
    store = FakeStore()
    m = new_machine()
    m.step_do("a", 1, 1, {"retries": {"limit": 2, "delay": 10_000}}, T0)
    assert m.attempt_failed(do_key("a"), 1, BOOM, T0) == Suspend(T0 + 10_000)
    store.commit(m.take_changes())
    assert m.next_wake() == T0 + 10_000

    early = store.load()
    early.start_run(T0 + 4000)
    assert early.step_do("a", 1, 1, None, T0 + 4000) == Suspend(T0 + 10_000)
    assert early.next_wake() == T0 + 10_000
    store.commit(early.take_changes())

    late = store.load()
    assert late.start_run(T0 + 10_000).journal == {}
    d = late.step_do("a", 1, 1, None, T0 + 10_000)
    assert isinstance(d, Run) and d.attempt == 2
    assert late.next_wake() is None
