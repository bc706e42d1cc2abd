"""step.sleep and step.sleepUntil, and the status an instance shows meanwhile."""

from __future__ import annotations

from compat.differences import WAITING, difference
from compat.scenario import Scenario


def test_sleep_ms(sc: Scenario) -> None:
    """sleep(name, ms) holds the run for that long, no less."""
    i = sc.create([{"sleep": "nap", "duration": 1200}, {"do": "after"}])
    sc.wait(600)
    assert sc.status(i)["status"] != "complete"
    sc.wait(800)
    assert sc.results(i) == [{"slept": "nap"}, {"step": "after", "attempt": 1}]


def test_sleep_duration_string(sc: Scenario) -> None:
    """sleep accepts a Duration string ("1 second")."""
    i = sc.create([{"sleep": "nap", "duration": "1 second"}])
    sc.wait(400)
    assert sc.status(i)["status"] != "complete"
    sc.wait(800)
    assert sc.results(i) == [{"slept": "nap"}]


def test_sleep_zero(sc: Scenario) -> None:
    """sleep(name, 0) returns at once."""
    i = sc.create([{"sleep": "none", "duration": 0}, {"do": "after"}])
    assert sc.results(i) == [{"slept": "none"}, {"step": "after", "attempt": 1}]


def test_consecutive_sleeps(sc: Scenario) -> None:
    """Two sleeps in a row add up."""
    i = sc.create([{"sleep": "a", "duration": 700}, {"sleep": "b", "duration": 700}])
    sc.wait(700)
    sc.wait(300)
    assert sc.status(i)["status"] != "complete"
    sc.wait(600)
    assert sc.results(i) == [{"slept": "a"}, {"slept": "b"}]


def test_repeated_sleep_names(sc: Scenario) -> None:
    """Sleeps with one name are separate sleeps."""
    i = sc.create([{"sleep": "z", "duration": 500}, {"sleep": "z", "duration": 500}])
    sc.wait(500)
    sc.wait(600)
    assert sc.results(i) == [{"slept": "z"}, {"slept": "z"}]


@difference(wrangler=WAITING)
def test_status_while_sleeping(sc: Scenario) -> None:
    """status() during a sleep is `waiting` (production), then `complete`."""
    i = sc.create([{"do": "a"}, {"sleep": "nap", "duration": 1000}])
    sc.wait(200)
    assert sc.status(i)["status"] == sc.running_status()
    sc.wait(1000)
    assert sc.finished(i)["status"] == "complete"


def test_sleep_until_epoch_ms(sc: Scenario) -> None:
    """sleepUntil(epoch ms) wakes at that time, not before."""
    i = sc.create([{"sleepUntil": "until", "after": 1200}, {"do": "after"}])
    sc.wait(500)
    assert sc.status(i)["status"] != "complete"
    sc.wait(900)
    assert sc.results(i) == [{"slept": "until"}, {"step": "after", "attempt": 1}]


def test_sleep_until_date(sc: Scenario) -> None:
    """sleepUntil(Date) works like epoch ms."""
    i = sc.create([{"sleepUntil": "until", "after": 1000, "asDate": True}])
    sc.wait(400)
    assert sc.status(i)["status"] != "complete"
    sc.wait(800)
    assert sc.results(i) == [{"slept": "until"}]


def test_sleep_until_past_throws(sc: Scenario) -> None:
    """sleepUntil a time in the past throws an error run() can catch."""
    i = sc.create([{"sleepUntil": "past", "at": 1_000_000, "catch": True}, {"do": "after"}])
    res = sc.results(i)
    assert res[0]["caught"]["message"].endswith(
        "You can't sleep until a time in the past, time-traveler"
    )
    assert res[1] == {"step": "after", "attempt": 1}


def test_sleep_then_steps_then_sleep(sc: Scenario) -> None:
    """Steps between sleeps run once each, in order."""
    i = sc.create(
        [
            {"do": "a", "once": True},
            {"sleep": "s1", "duration": 500},
            {"do": "b", "once": True},
            {"sleep": "s2", "duration": 500},
            {"do": "c", "once": True},
        ]
    )
    sc.wait(500)
    sc.wait(600)
    assert [r.get("step", r.get("slept")) for r in sc.results(i)] == ["a", "s1", "b", "s2", "c"]
