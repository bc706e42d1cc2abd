"""step.do results, replay, names and step context."""

from __future__ import annotations

from compat.differences import RETRY_DELAY, difference
from compat.scenario import Scenario


def test_steps_return_values_in_order(sc: Scenario) -> None:
    """Each step.do result reaches run() in call order, and run()'s value is the output."""
    i = sc.create([{"do": "a"}, {"do": "b", "value": {"x": [1, 2]}}, {"do": "c", "value": "text"}])
    assert sc.results(i) == [{"step": "a", "attempt": 1}, {"x": [1, 2]}, "text"]


def test_empty_run_completes(sc: Scenario) -> None:
    """A run() that calls no step still completes with its return value."""
    i = sc.create([])
    assert sc.output(i) == {"results": []}


def test_primitive_step_values(sc: Scenario) -> None:
    """Numbers, booleans, null, strings and arrays come back from step.do unchanged."""
    values = [0, -1.5, True, False, None, "", "ünïcödé ✓", [1, [2, [3]]], {"deep": {"er": {}}}]
    i = sc.create([{"do": f"v{n}", "value": v} for n, v in enumerate(values)])
    assert sc.results(i) == values


def test_finished_step_is_not_run_again_after_sleep(sc: Scenario) -> None:
    """A finished step's callback does not run again when run() continues after a sleep."""
    i = sc.create([{"do": "a", "once": True}, {"sleep": "nap", "duration": 1000}, {"do": "b"}])
    sc.wait(1000)
    sc.wait(300)
    assert sc.results(i) == [
        {"step": "a", "attempt": 1},
        {"slept": "nap"},
        {"step": "b", "attempt": 1},
    ]


def test_finished_steps_not_rerun_after_event(sc: Scenario) -> None:
    """Steps before a waitForEvent keep their results and do not run again after the event."""
    i = sc.create(
        [{"do": "a", "once": True}, {"wait": "w", "type": "go"}, {"do": "b", "once": True}]
    )
    sc.settle()
    sc.event(i, "go", {"n": 1})
    res = sc.results(i)
    assert res[0] == {"step": "a", "attempt": 1}
    assert res[1]["payload"] == {"n": 1}
    assert res[2] == {"step": "b", "attempt": 1}


def test_repeated_step_names_count_up(sc: Scenario) -> None:
    """Three step.do calls with one name are three steps; ctx.step.count is 1, 2, 3."""
    i = sc.create([{"do": "same", "ctx": True} for _ in range(3)])
    counts = [r["ctx"]["step"]["count"] for r in sc.results(i)]
    names = {r["ctx"]["step"]["name"] for r in sc.results(i)}
    assert counts == [1, 2, 3]
    assert names == {"same"}


def test_repeated_names_counted_per_name(sc: Scenario) -> None:
    """The occurrence count is per name: a, b, a gives counts 1, 1, 2."""
    i = sc.create([{"do": "a", "ctx": True}, {"do": "b", "ctx": True}, {"do": "a", "ctx": True}])
    got = [(r["ctx"]["step"]["name"], r["ctx"]["step"]["count"]) for r in sc.results(i)]
    assert got == [("a", 1), ("b", 1), ("a", 2)]


def test_repeated_names_keep_their_own_results(sc: Scenario) -> None:
    """Steps with one name keep separate results across a replay."""
    i = sc.create(
        [
            {"do": "same", "value": 1},
            {"do": "same", "value": 2},
            {"sleep": "s", "duration": 1000},
            {"do": "same", "value": 3},
        ]
    )
    sc.wait(1000)
    assert sc.results(i) == [1, 2, {"slept": "s"}, 3]


@difference(wrangler=RETRY_DELAY)
def test_step_context_defaults(sc: Scenario) -> None:
    """ctx carries step name and count, attempt 1, and the default config."""
    i = sc.create([{"do": "ctx step", "ctx": True}])
    (r,) = sc.results(i)
    ctx = r["ctx"]
    assert ctx["step"] == {"name": "ctx step", "count": 1}
    assert ctx["attempt"] == 1
    assert ctx["config"]["retries"] == {
        "limit": 5,
        "delay": sc.pick(celld=10000, wrangler=1000),
        "backoff": "exponential",
    }
    assert ctx["config"]["timeout"] == "10 minutes"


def test_step_context_user_config(sc: Scenario) -> None:
    """ctx.config shows the step's own retries and timeout."""
    config = {"retries": {"limit": 2, "delay": 250, "backoff": "linear"}, "timeout": "30 seconds"}
    i = sc.create([{"do": "configured", "ctx": True, "config": config}])
    (r,) = sc.results(i)
    assert r["ctx"]["config"]["retries"] == {"limit": 2, "delay": 250, "backoff": "linear"}
    assert r["ctx"]["config"]["timeout"] == "30 seconds"


def test_step_context_attempt_counts_retries(sc: Scenario) -> None:
    """ctx.attempt is 1-based and grows with each retry."""
    config = {"retries": {"limit": 3, "delay": 200, "backoff": "constant"}}
    i = sc.create([{"do": "flaky", "fail": 2, "ctx": True, "config": config}])
    sc.wait(200)
    sc.wait(200)
    sc.wait(200)
    (r,) = sc.results(i)
    assert r["attempt"] == 3
    assert r["ctx"]["step"] == {"name": "flaky", "count": 1}


def test_event_fields(sc: Scenario) -> None:
    """run() gets event.instanceId, workflowName, a Date timestamp and the payload."""
    i = sc.create([{"event": True}], extra=1)
    (r,) = sc.results(i)
    assert r == {
        "instanceId": i,
        "workflowName": "script-workflow",
        "timestampIsDate": True,
        "payloadKeys": ["ops", "extra"],
    }


def test_event_payload_round_trip(sc: Scenario) -> None:
    """The params given to create() reach run() as event.payload, deep values intact."""
    data = {"s": "x", "n": 1.25, "l": [1, {"k": None}], "b": False}
    i = sc.create([{"do": "echo", "echo": True}], data=data)
    assert sc.results(i) == [data]


def test_nested_steps(sc: Scenario) -> None:
    """A step.do inside a step.do callback runs and both return."""
    i = sc.create([{"do": "outer", "nested": [{"do": "inner-1"}, {"do": "inner-2", "value": 7}]}])
    assert sc.results(i) == [{"nested": [{"step": "inner-1", "attempt": 1}, 7]}]


def test_parallel_steps(sc: Scenario) -> None:
    """Promise.all over step.do calls gives every result in order."""
    i = sc.create([{"parallel": [{"do": "p1"}, {"do": "p2", "value": 2}, {"do": "p3"}]}])
    assert sc.results(i) == [[{"step": "p1", "attempt": 1}, 2, {"step": "p3", "attempt": 1}]]


def test_parallel_steps_with_retry(sc: Scenario) -> None:
    """One parallel step retrying does not disturb its siblings."""
    config = {"retries": {"limit": 2, "delay": 300, "backoff": "constant"}}
    i = sc.create(
        [{"parallel": [{"do": "ok"}, {"do": "flaky", "fail": 1, "config": config}]}, {"do": "z"}]
    )
    sc.wait(300)
    assert sc.results(i) == [
        [{"step": "ok", "attempt": 1}, {"step": "flaky", "attempt": 2}],
        {"step": "z", "attempt": 1},
    ]


def test_parallel_sleep_and_steps(sc: Scenario) -> None:
    """A sleep in parallel with steps: the steps finish, the run waits for the sleep."""
    i = sc.create([{"parallel": [{"sleep": "nap", "duration": 1500}, {"do": "work"}]}])
    sc.wait(500)
    assert sc.status(i)["status"] != "complete"
    sc.wait(1200)
    assert sc.results(i) == [[{"slept": "nap"}, {"step": "work", "attempt": 1}]]


def test_race_step_against_sleep(sc: Scenario) -> None:
    """Promise.race of a step and a long sleep: the step wins."""
    i = sc.create(
        [{"race": [{"sleep": "long", "duration": 1000}, {"do": "fast"}]}, {"do": "after"}]
    )
    sc.settle()
    sc.wait(1000)
    res = sc.results(i)
    assert res[0] == {"step": "fast", "attempt": 1}
    assert res[1] == {"step": "after", "attempt": 1}


def test_step_name_256_chars(sc: Scenario) -> None:
    """A 256-character step name is accepted."""
    name = "n" * 256
    i = sc.create([{"do": name, "value": "ok"}])
    assert sc.results(i) == ["ok"]


FATAL = "WorkflowFatalError: "


def test_step_name_257_chars_is_catchable(sc: Scenario) -> None:
    """A 257-character step name throws a WorkflowFatalError into run(), which can catch it."""
    name = "n" * 257
    i = sc.create([{"do": name, "value": "ok", "catch": True}, {"do": "after", "value": 1}])
    message = f'Step name "{name}" exceeds max length (256 chars) or invalid characters found'
    assert sc.results(i) == [{"caught": {"name": "Error", "message": FATAL + message}}, 1]


def test_step_name_control_character_fails(sc: Scenario) -> None:
    """A control character in a step name, uncaught, errors the instance."""
    name = "bad\u0001name"
    i = sc.create([{"do": name}])
    assert sc.failure(i) == {
        "name": "Error",
        "message": FATAL
        + f'Step name "{name}" exceeds max length (256 chars) or invalid characters found',
    }


def test_step_without_callback_fails(sc: Scenario) -> None:
    """step.do without a callback errors the instance with a message naming the step."""
    i = sc.create([{"do": "lonely", "noCallback": True}])
    assert sc.failure(i) == {
        "name": "Error",
        "message": FATAL + 'Step "lonely" requires a callback function',
    }


def test_step_without_callback_is_catchable(sc: Scenario) -> None:
    """The missing-callback error can be caught and the run goes on."""
    i = sc.create([{"do": "lonely", "noCallback": True, "catch": True}, {"do": "next", "value": 2}])
    res = sc.results(i)
    assert res[0]["caught"]["message"] == FATAL + 'Step "lonely" requires a callback function'
    assert res[1] == 2


CONFIG_ERROR = (
    FATAL + 'Step config for "{}" is in a invalid format. '
    "See https://developers.cloudflare.com/workflows/build/sleeping-and-retrying/"
)


def test_invalid_step_config_unknown_key(sc: Scenario) -> None:
    """A config with an unknown key errors the instance, naming the step."""
    i = sc.create([{"do": "cfg", "config": {"retries": {"limit": 1, "delay": 10}, "bogus": 1}}])
    assert sc.failure(i) == {"name": "Error", "message": CONFIG_ERROR.format("cfg")}


def test_invalid_step_config_negative_limit(sc: Scenario) -> None:
    """retries.limit below 0 is an invalid config."""
    i = sc.create([{"do": "neg", "config": {"retries": {"limit": -1, "delay": 10}}}])
    assert sc.failure(i) == {"name": "Error", "message": CONFIG_ERROR.format("neg")}


def test_invalid_step_config_zero_timeout_is_catchable(sc: Scenario) -> None:
    """timeout 0 is an invalid config; the error can be caught."""
    i = sc.create([{"do": "zero", "config": {"timeout": 0}, "catch": True}, {"do": "after"}])
    res = sc.results(i)
    assert res[0] == {"caught": {"name": "Error", "message": CONFIG_ERROR.format("zero")}}
    assert res[1] == {"step": "after", "attempt": 1}


LIMIT = (
    FATAL + "The limit of 5 steps has been reached. "
    "This limit can be changed in your worker configuration."
)


def test_step_limit_reached(sc: Scenario) -> None:
    """LIMITED allows 5 step.do calls; the 6th errors the instance."""
    i = sc.create([{"do": f"s{n}"} for n in range(6)], wf="LIMITED")
    assert sc.failure(i, wf="LIMITED") == {"name": "Error", "message": LIMIT}


def test_step_limit_exactly_reached_completes(sc: Scenario) -> None:
    """Exactly 5 step.do calls on LIMITED complete."""
    i = sc.create([{"do": f"s{n}"} for n in range(5)], wf="LIMITED")
    assert len(sc.results(i, wf="LIMITED")) == 5


def test_step_limit_ignores_sleeps(sc: Scenario) -> None:
    """Sleeps do not count toward the step limit."""
    ops = [{"do": f"s{n}"} for n in range(5)]
    ops[2:2] = [{"sleep": "z1", "duration": 100}, {"sleep": "z2", "duration": 100}]
    i = sc.create(ops, wf="LIMITED")
    sc.wait(100)
    sc.wait(100)
    assert len(sc.results(i, wf="LIMITED")) == 7


def test_step_limit_error_is_catchable(sc: Scenario) -> None:
    """The step-limit error reaches run() as an error it can catch."""
    ops = [{"do": f"s{n}"} for n in range(5)] + [{"do": "over", "catch": True}]
    i = sc.create(ops, wf="LIMITED")
    assert sc.results(i, wf="LIMITED")[5] == {"caught": {"name": "Error", "message": LIMIT}}
