"""step.waitForEvent and instance.sendEvent."""

from __future__ import annotations

from compat.differences import EVENT_TYPE, WAIT_TIMEOUT_RANGE, WAITING, difference
from compat.scenario import Scenario


def test_event_delivered_to_waiting_instance(sc: Scenario) -> None:
    """An event sent while the instance waits is returned by waitForEvent."""
    i = sc.create([{"wait": "approval", "type": "approve", "timeout": "1 minute"}])
    sc.wait(200)
    assert sc.status(i)["status"] != "complete"
    sc.event(i, "approve", {"by": "alice"})
    assert sc.results(i) == [
        {"type": "approve", "payload": {"by": "alice"}, "timestampIsDate": True}
    ]  # noqa: E501


def test_event_buffered_before_wait(sc: Scenario) -> None:
    """An event sent before the instance reaches its wait is kept and consumed there."""
    i = sc.create([{"sleep": "first", "duration": 1000}, {"wait": "w", "type": "early"}])
    sc.wait(200)
    sc.event(i, "early", {"n": 1})
    sc.wait(1000)
    assert sc.results(i) == [
        {"slept": "first"},
        {"type": "early", "payload": {"n": 1}, "timestampIsDate": True},
    ]


def test_buffered_events_fifo(sc: Scenario) -> None:
    """Several buffered events of one type are consumed oldest first, one per wait."""
    i = sc.create(
        [
            {"sleep": "first", "duration": 1000},
            {"wait": "w1", "type": "item"},
            {"wait": "w2", "type": "item"},
            {"wait": "w3", "type": "item"},
        ]
    )
    sc.wait(100)
    for n in range(3):
        sc.event(i, "item", n)
    sc.wait(1100)
    assert [r["payload"] for r in sc.results(i)[1:]] == [0, 1, 2]


def test_events_matched_by_type(sc: Scenario) -> None:
    """A wait takes only events of its type; others stay buffered for their own waits."""
    i = sc.create([{"wait": "a", "type": "alpha"}, {"wait": "b", "type": "beta"}])
    sc.settle()
    sc.event(i, "beta", "B")
    sc.wait(100)
    assert sc.status(i)["status"] != "complete"
    sc.event(i, "alpha", "A")
    res = sc.results(i)
    assert [(r["type"], r["payload"]) for r in res] == [("alpha", "A"), ("beta", "B")]


def test_event_without_payload(sc: Scenario) -> None:
    """An event with no payload gives payload undefined (dropped from the JSON output)."""
    i = sc.create([{"wait": "w", "type": "bare"}])
    sc.settle()
    sc.event(i, "bare")
    (r,) = sc.results(i)
    assert r["type"] == "bare"
    assert "payload" not in r


def test_event_payload_types(sc: Scenario) -> None:
    """An event payload keeps its JSON shape."""
    payload = {"list": [1, 2.5, "x", None, True], "nested": {"k": "v"}}
    i = sc.create([{"wait": "w", "type": "data"}])
    sc.settle()
    sc.event(i, "data", payload)
    assert sc.results(i)[0]["payload"] == payload


def test_wait_timeout_errors_instance(sc: Scenario) -> None:
    """A wait that times out, uncaught, errors the instance with the timeout message."""
    i = sc.create([{"wait": "w", "type": "never", "timeout": "1 second"}])
    sc.wait(500)
    assert sc.status(i)["status"] != "errored"
    sc.wait(700)
    assert sc.failure(i) == {
        "name": "Error",
        "message": "WorkflowTimeoutError: Execution timed out after 1000ms",
    }


def test_wait_timeout_is_catchable(sc: Scenario) -> None:
    """A timed-out wait can be caught and the run goes on."""
    i = sc.create([{"wait": "w", "type": "never", "timeout": 1000, "catch": True}, {"do": "next"}])
    sc.wait(1200)
    res = sc.results(i)
    assert res[0]["caught"]["message"].endswith("Execution timed out after 1000ms")
    assert res[1] == {"step": "next", "attempt": 1}


def test_late_event_after_timeout_is_buffered(sc: Scenario) -> None:
    """An event sent after a wait timed out is kept for the next wait of that type."""
    i = sc.create(
        [
            {"wait": "w1", "type": "late", "timeout": 1000, "catch": True},
            {"sleep": "gap", "duration": 1000},
            {"wait": "w2", "type": "late", "timeout": "1 minute"},
        ]
    )
    sc.wait(1200)
    sc.event(i, "late", "second")
    sc.wait(1100)
    res = sc.results(i)
    assert res[0]["caught"]["message"].endswith("Execution timed out after 1000ms")
    assert res[2]["payload"] == "second"


@difference(wrangler=WAITING)
def test_status_while_waiting_for_event(sc: Scenario) -> None:
    """status() while waiting for an event is `waiting` (production)."""
    i = sc.create([{"wait": "w", "type": "go"}])
    sc.wait(200)
    assert sc.status(i)["status"] == sc.running_status()
    sc.event(i, "go")
    assert sc.finished(i)["status"] == "complete"


def test_parallel_waits(sc: Scenario) -> None:
    """Two waits in parallel each get their own event."""
    i = sc.create([{"parallel": [{"wait": "a", "type": "ta"}, {"wait": "b", "type": "tb"}]}])
    sc.settle()
    sc.event(i, "tb", 2)
    sc.event(i, "ta", 1)
    (pair,) = sc.results(i)
    assert [p["payload"] for p in pair] == [1, 2]


def test_race_wait_against_sleep(sc: Scenario) -> None:
    """Promise.race of a wait and a sleep: the event wins if it comes first."""
    i = sc.create([{"race": [{"wait": "w", "type": "go"}, {"sleep": "s", "duration": 5000}]}])
    sc.wait(200)
    sc.event(i, "go", "won")
    (r,) = sc.results(i)
    assert r["payload"] == "won"


@difference(wrangler=EVENT_TYPE)
def test_invalid_event_type_rejected(sc: Scenario) -> None:
    """sendEvent with a type outside the id grammar throws (production validates it)."""
    i = sc.create([{"wait": "w", "type": "ok", "timeout": "1 minute"}])
    code, body = sc.call("/event", id=i, type="bad type!", body={})
    assert code == sc.pick(celld=500, wrangler=200)
    if code == 500:
        assert "(workflow.invalid_event_type)" in body["error"]["message"]


@difference(wrangler=EVENT_TYPE)
def test_event_type_101_chars_rejected(sc: Scenario) -> None:
    """An event type of 101 characters is refused; 100 is accepted."""
    i = sc.create([{"wait": "w", "type": "t" * 100}])
    sc.settle()
    code, _ = sc.call("/event", id=i, type="t" * 101, body={})
    assert code == sc.pick(celld=500, wrangler=200)
    sc.event(i, "t" * 100, "hundred")
    assert sc.results(i)[0]["payload"] == "hundred"


@difference(wrangler=WAIT_TIMEOUT_RANGE)
def test_wait_timeout_below_one_second_invalid(sc: Scenario) -> None:
    """A waitForEvent timeout under 1 s is an invalid config (thrown into run())."""
    i = sc.create([{"wait": "w", "type": "x", "timeout": 500}])
    sc.wait(600)
    assert sc.failure(i) == sc.pick(
        celld={
            "name": "Error",
            "message": 'WorkflowFatalError: Step config for "w" is in a invalid format. '
            "See https://developers.cloudflare.com/workflows/build/sleeping-and-retrying/",
        },
        wrangler={
            "name": "Error",
            "message": "WorkflowTimeoutError: Execution timed out after 500ms",
        },
    )


def test_wait_default_timeout_is_long(sc: Scenario) -> None:
    """With no timeout, a wait is still pending after 2 s and takes a late event."""
    i = sc.create([{"wait": "w", "type": "slow"}])
    sc.wait(2000)
    assert sc.status(i)["status"] not in ("errored", "complete")
    sc.event(i, "slow", "finally")
    assert sc.results(i)[0]["payload"] == "finally"


def test_parallel_waits_events_apart(sc: Scenario) -> None:
    """Parallel waits whose events come one at a time, the instance idle in between."""
    i = sc.create([{"parallel": [{"wait": "a", "type": "ta"}, {"wait": "b", "type": "tb"}]}])
    sc.settle()
    sc.event(i, "tb", 2)
    sc.wait(100)
    assert sc.status(i)["status"] != "complete"
    sc.event(i, "ta", 1)
    (pair,) = sc.results(i)
    assert [p["payload"] for p in pair] == [1, 2]
