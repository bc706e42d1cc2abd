"""`sensitive: "output"` step config: the step's output is hidden from what
observes the instance (subscribe() shows "[REDACTED]"), yet run() gets the value, replays
included."""

from __future__ import annotations

from compat.scenario import Scenario

SECRET = {"do": "secret", "value": "s3cr3t", "config": {"sensitive": "output"}, "once": True}


def test_sensitive_value_reaches_run(sc: Scenario) -> None:
    """A sensitive step's value is returned to run() like any other."""
    i = sc.create([SECRET, {"do": "plain", "value": "open"}])
    assert sc.results(i) == ["s3cr3t", "open"]


def test_sensitive_value_survives_replay(sc: Scenario) -> None:
    """Read back from storage after a sleep, the sensitive step gives its value again (its
    callback does not run again)."""
    i = sc.create([SECRET, {"sleep": "s", "duration": 500}])
    sc.wait(500)
    assert sc.results(i) == ["s3cr3t", {"slept": "s"}]


def test_sensitive_in_step_context(sc: Scenario) -> None:
    """ctx.config carries sensitive: "output"."""
    i = sc.create([{"do": "c", "ctx": True, "config": {"sensitive": "output"}}])
    (r,) = sc.results(i)
    assert r["ctx"]["config"]["sensitive"] == "output"


def test_run_output_is_not_redacted(sc: Scenario) -> None:
    """What run() returns is the instance's output, shown by status() as it is, even when it
    holds a sensitive step's value."""
    i = sc.create([SECRET])
    assert sc.finished(i)["output"] == {"results": ["s3cr3t"]}


def test_subscribe_redacts_sensitive_output(sc: Scenario) -> None:
    """subscribe() shows a sensitive step's output as "[REDACTED]", other steps' as they are."""
    i = sc.create([SECRET, {"do": "plain", "value": "open"}])
    sc.output(i)
    got = sc.ok("/subscribe", id=i, filter="step_completed")
    assert got["events"] == [
        {"type": "step_completed", "stepName": "secret-1", "output": "[REDACTED]"},
        {"type": "step_completed", "stepName": "plain-1", "output": "open"},
    ]


def test_subscribe_shows_sensitive_config(sc: Scenario) -> None:
    """step_started carries the step's config with sensitive: "output"."""
    i = sc.create([SECRET])
    sc.output(i)
    (started,) = sc.ok("/subscribe", id=i, filter="step_started")["events"]
    assert started["config"]["sensitive"] == "output"


def test_bad_sensitive_value_refused(sc: Scenario) -> None:
    """sensitive takes only "output": another value is a bad step config, thrown into run()."""
    i = sc.create([{"do": "c", "config": {"sensitive": "all"}, "catch": True}])
    (r,) = sc.results(i)
    assert r["caught"]["message"].startswith('WorkflowFatalError: Step config for "c" is in a')
