"""Retries, backoff, timeouts and errors.

Delays are checked from both sides: the instance must not have progressed before a retry is
due, and must progress once it is. On celld the clock moves exactly; on wrangler dev real time
passes, so every check sits well inside its interval.
"""

from __future__ import annotations

from compat.differences import NON_RETRYABLE, RETRY_DELAY, WAITING, difference
from compat.scenario import Scenario


def retries(limit: int, delay: int | str, backoff: str = "constant") -> dict[str, object]:
    return {"retries": {"limit": limit, "delay": delay, "backoff": backoff}}


def test_retry_until_success(sc: Scenario) -> None:
    """A step failing twice succeeds on its third attempt."""
    i = sc.create([{"do": "flaky", "fail": 2, "config": retries(3, 200)}])
    sc.wait(200)
    sc.wait(200)
    assert sc.results(i) == [{"step": "flaky", "attempt": 3}]


def test_limit_zero_means_one_attempt(sc: Scenario) -> None:
    """retries.limit 0: one attempt, then the instance errors with that attempt's error."""
    i = sc.create([{"do": "once", "always": True, "config": retries(0, 100)}])
    assert sc.failure(i) == {"name": "Error", "message": "once failed on attempt 1"}


def test_limit_counts_retries_after_first_attempt(sc: Scenario) -> None:
    """retries.limit 3 gives four attempts; the last attempt's error is reported."""
    i = sc.create([{"do": "four", "always": True, "config": retries(3, 100)}])
    for _ in range(3):
        sc.wait(100)
    assert sc.failure(i) == {"name": "Error", "message": "four failed on attempt 4"}


def test_exhausted_error_is_catchable(sc: Scenario) -> None:
    """After the last attempt the step's error can be caught in run()."""
    i = sc.create(
        [{"do": "x", "always": True, "config": retries(1, 100), "catch": True}, {"do": "y"}]
    )
    sc.wait(100)
    assert sc.results(i) == [
        {"caught": {"name": "Error", "message": "x failed on attempt 2"}},
        {"step": "y", "attempt": 1},
    ]


def test_constant_backoff_delay_honoured(sc: Scenario) -> None:
    """Constant backoff: each retry waits the same delay, no sooner."""
    i = sc.create([{"do": "c", "fail": 2, "config": retries(2, 1000)}])
    sc.wait(1000)  # attempt 2 runs and fails
    sc.wait(500)
    assert sc.status(i)["status"] != "complete"
    sc.wait(700)
    assert sc.results(i) == [{"step": "c", "attempt": 3}]


def test_linear_backoff_delay_honoured(sc: Scenario) -> None:
    """Linear backoff: delay d*n after the n-th failure (300, 600, 900 ms)."""
    i = sc.create([{"do": "l", "fail": 3, "config": retries(3, 300, "linear")}])
    sc.wait(300)
    sc.wait(600)
    sc.wait(600)  # third delay is 900
    assert sc.status(i)["status"] != "complete"
    sc.wait(500)
    assert sc.results(i) == [{"step": "l", "attempt": 4}]


def test_exponential_backoff_delay_honoured(sc: Scenario) -> None:
    """Exponential backoff: delay d*2^(n-1) (300, 600, 1200 ms)."""
    i = sc.create([{"do": "e", "fail": 3, "config": retries(3, 300, "exponential")}])
    sc.wait(300)
    sc.wait(600)
    sc.wait(900)  # third delay is 1200
    assert sc.status(i)["status"] != "complete"
    sc.wait(500)
    assert sc.results(i) == [{"step": "e", "attempt": 4}]


def test_backoff_defaults_to_exponential(sc: Scenario) -> None:
    """retries without backoff inherit the default, exponential (400 then 800 ms)."""
    i = sc.create([{"do": "d", "fail": 2, "config": {"retries": {"limit": 2, "delay": 400}}}])
    sc.wait(400)
    sc.wait(500)  # second delay is 800
    assert sc.status(i)["status"] != "complete"
    sc.wait(500)
    assert sc.results(i) == [{"step": "d", "attempt": 3}]


def test_delay_as_duration_string(sc: Scenario) -> None:
    """retries.delay may be a Duration string."""
    i = sc.create([{"do": "s", "fail": 1, "config": retries(1, "1 second")}])
    sc.wait(400)
    assert sc.status(i)["status"] != "complete"
    sc.wait(800)
    assert sc.results(i) == [{"step": "s", "attempt": 2}]


def test_delay_zero(sc: Scenario) -> None:
    """retries.delay 0 retries at once."""
    i = sc.create([{"do": "z", "fail": 3, "config": retries(3, 0)}])
    assert sc.results(i) == [{"step": "z", "attempt": 4}]


@difference(wrangler=RETRY_DELAY)
def test_default_retry_delay(sc: Scenario) -> None:
    """With no config, a failed attempt is retried after the default delay, not before."""
    delay = sc.pick(celld=10_000, wrangler=1000)
    i = sc.create([{"do": "dflt", "fail": 1}])
    sc.wait(delay * 4 // 10)
    assert sc.status(i)["status"] != "complete"
    sc.wait(delay * 8 // 10)
    assert sc.results(i) == [{"step": "dflt", "attempt": 2}]


@difference(wrangler=WAITING)
def test_status_while_retry_pending(sc: Scenario) -> None:
    """During a retry delay, status() says the instance is waiting."""
    i = sc.create([{"do": "w", "fail": 1, "config": retries(1, 1500)}])
    sc.wait(300)
    assert sc.status(i)["status"] == sc.running_status()
    sc.wait(1400)
    assert sc.results(i) == [{"step": "w", "attempt": 2}]


def test_dynamic_delay_function(sc: Scenario) -> None:
    """A delay function's value is used (through the backoff: constant keeps it)."""
    config = {"retries": {"limit": 2, "delayFn": [1000, 1000], "backoff": "constant"}}
    i = sc.create([{"do": "dyn", "fail": 1, "config": config}])
    sc.wait(400)
    assert sc.status(i)["status"] != "complete"
    sc.wait(800)
    assert sc.results(i) == [{"step": "dyn", "attempt": 2}]


def test_step_timeout_retries(sc: Scenario) -> None:
    """An attempt that exceeds its timeout fails and is retried."""
    config = {"retries": {"limit": 1, "delay": 100, "backoff": "constant"}, "timeout": 1000}
    i = sc.create([{"do": "slow", "hang": 1, "config": config}])
    sc.wait(500, settle=False)
    assert sc.status(i)["status"] == "running"
    sc.wait(600, settle=False)
    sc.wait(200, settle=False)
    assert sc.results(i) == [{"step": "slow", "attempt": 2}]


def test_step_timeout_error(sc: Scenario) -> None:
    """A step that always times out errors with WorkflowTimeoutError's message."""
    config = {"retries": {"limit": 0, "delay": 100}, "timeout": "1 second"}
    i = sc.create([{"do": "stuck", "hang": True, "config": config}])
    sc.wait(1100, settle=False)
    assert sc.failure(i) == {
        "name": "Error",
        "message": "WorkflowTimeoutError: Execution timed out after 1000ms",
    }


@difference(wrangler=NON_RETRYABLE)
def test_non_retryable_error_stops_retries(sc: Scenario) -> None:
    """NonRetryableError fails the step at once (no retry delay) and errors the instance."""
    i = sc.create(
        [{"do": "nr", "always": True, "error": "nonretryable", "config": retries(5, 60000)}]
    )  # noqa: E501
    assert sc.failure(i) == sc.pick(
        celld={"name": "NonRetryableError", "message": "nr failed on attempt 1"},
        wrangler={
            "name": "WorkflowFatalError",
            "message": "The execution of the Workflow instance was terminated, "
            "as a step threw an NonRetryableError and it was not handled",
        },
    )


def test_non_retryable_error_is_catchable(sc: Scenario) -> None:
    """A NonRetryableError can be caught in run(); it arrives folded as the step RPC folds it."""
    i = sc.create(
        [{"do": "nr", "always": True, "error": "nonretryable", "catch": True}, {"do": "next"}]
    )
    assert sc.results(i) == [
        {"caught": {"name": "Error", "message": "NonRetryableError: nr failed on attempt 1"}},
        {"step": "next", "attempt": 1},
    ]


def test_non_retryable_after_retries(sc: Scenario) -> None:
    """A NonRetryableError on a later attempt stops the remaining retries."""
    config = retries(5, 200)
    op = {"do": "late", "always": True, "nonretryableFrom": 2, "config": config, "catch": True}
    i = sc.create([op])
    sc.wait(200)
    res = sc.results(i)
    assert res == [
        {"caught": {"name": "Error", "message": "NonRetryableError: late failed on attempt 2"}}
    ]


def test_type_error_keeps_name(sc: Scenario) -> None:
    """A TypeError from a step keeps its name in status().error."""
    i = sc.create([{"do": "t", "always": True, "error": "type", "config": retries(0, 0)}])
    assert sc.failure(i) == {"name": "TypeError", "message": "t failed on attempt 1"}


def test_range_error_keeps_name_when_caught(sc: Scenario) -> None:
    """A RangeError from a step reaches run() as a RangeError."""
    i = sc.create(
        [{"do": "r", "always": True, "error": "range", "config": retries(0, 0), "catch": True}]
    )
    assert sc.results(i) == [{"caught": {"name": "RangeError", "message": "r failed on attempt 1"}}]


def test_custom_error_is_folded(sc: Scenario) -> None:
    """A custom error class is reported as Error with its name in the message."""
    i = sc.create([{"do": "c", "always": True, "error": "custom", "config": retries(0, 0)}])
    assert sc.failure(i) == {"name": "Error", "message": "CustomError: c failed on attempt 1"}


def test_custom_error_caught_in_run(sc: Scenario) -> None:
    """A custom error thrown by a step reaches run() folded into an Error."""
    i = sc.create(
        [{"do": "c", "always": True, "error": "custom", "config": retries(0, 0), "catch": True}]
    )
    assert sc.results(i) == [
        {"caught": {"name": "Error", "message": "CustomError: c failed on attempt 1"}}
    ]


def test_thrown_string(sc: Scenario) -> None:
    """A thrown string is reported as an Error with that message."""
    i = sc.create([{"do": "s", "always": True, "error": "string", "config": retries(0, 0)}])
    assert sc.failure(i) == {"name": "Error", "message": "s failed on attempt 1"}


def test_error_thrown_in_run(sc: Scenario) -> None:
    """An Error thrown by run() outside any step errors the instance."""
    i = sc.create([{"do": "a"}, {"throw": "boom"}, {"do": "never"}])
    assert sc.failure(i) == {"name": "Error", "message": "boom"}


def test_custom_error_thrown_in_run(sc: Scenario) -> None:
    """A custom error thrown by run() is folded into an Error."""
    i = sc.create([{"throw": "bad state", "error": "custom"}])
    assert sc.failure(i) == {"name": "Error", "message": "CustomError: bad state"}


def test_type_error_thrown_in_run(sc: Scenario) -> None:
    """A TypeError thrown by run() keeps its name."""
    i = sc.create([{"throw": "wrong type", "error": "type"}])
    assert sc.failure(i) == {"name": "TypeError", "message": "wrong type"}


@difference(wrangler=NON_RETRYABLE)
def test_non_retryable_error_rethrown_from_run(sc: Scenario) -> None:
    """A caught NonRetryableError rethrown by run() is reported as a NonRetryableError."""
    i = sc.create([{"do": "nr", "always": True, "error": "nonretryable"}, {"do": "never"}])
    err = sc.failure(i)
    assert err["name"] == sc.pick(celld="NonRetryableError", wrangler="WorkflowFatalError")


def test_failed_step_is_not_rerun_after_catch(sc: Scenario) -> None:
    """A step that exhausted its retries keeps its error after a later sleep (not rerun)."""
    i = sc.create(
        [
            {"do": "x", "always": True, "config": retries(0, 0), "catch": True},
            {"sleep": "s", "duration": 500},
            {"do": "y"},
        ]
    )
    sc.wait(500)
    assert sc.results(i) == [
        {"caught": {"name": "Error", "message": "x failed on attempt 1"}},
        {"slept": "s"},
        {"step": "y", "attempt": 1},
    ]
