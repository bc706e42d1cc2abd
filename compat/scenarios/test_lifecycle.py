"""pause, resume, terminate and restart (spec 2 "WorkflowInstance", 6)."""

from __future__ import annotations

from compat.differences import SEND_EVENT_FINISHED, WAITING, difference
from compat.scenario import Scenario

CANNOT_TERMINATE = (
    "WorkflowError: (instance.cannot_terminate) Cannot terminate instance since its on a finite "
    "state"
)


def test_pause_during_sleep_then_resume(sc: Scenario) -> None:
    """A paused instance does not finish its sleep; after resume it completes."""
    i = sc.create([{"sleep": "nap", "duration": 1000}, {"do": "after"}])
    sc.wait(200)
    sc.pause(i)
    assert sc.until(i, "paused")["status"] == "paused"
    sc.wait(1300)
    assert sc.status(i)["status"] == "paused"
    sc.resume(i)
    sc.wait(1200)
    assert sc.results(i) == [{"slept": "nap"}, {"step": "after", "attempt": 1}]


def test_pause_during_retry_keeps_attempt_count(sc: Scenario) -> None:
    """Pausing during a retry delay and resuming carries the attempt count on."""
    i = sc.create(
        [
            {
                "do": "f",
                "fail": 2,
                "config": {"retries": {"limit": 3, "delay": 600, "backoff": "constant"}},
            }
        ]
    )  # noqa: E501
    sc.wait(100)
    sc.pause(i)
    sc.until(i, "paused")
    sc.resume(i)
    for _ in range(3):
        sc.wait(700)
    assert sc.results(i) == [{"step": "f", "attempt": 3}]


def test_pause_while_waiting_for_event(sc: Scenario) -> None:
    """An event sent while paused is kept; after resume the instance consumes it."""
    i = sc.create([{"wait": "w", "type": "go"}, {"do": "after"}])
    sc.wait(100)
    sc.pause(i)
    sc.until(i, "paused")
    sc.event(i, "go", "while paused")
    sc.wait(300)
    assert sc.status(i)["status"] == "paused"
    sc.resume(i)
    res = sc.results(i)
    assert res[0]["payload"] == "while paused"


def test_pause_paused_instance_is_noop(sc: Scenario) -> None:
    """pause() of a paused instance does not throw and it stays paused."""
    i = sc.create([{"sleep": "nap", "duration": 5000}])
    sc.wait(100)
    sc.pause(i)
    sc.until(i, "paused")
    sc.pause(i)
    assert sc.status(i)["status"] == "paused"


@difference(wrangler=WAITING)
def test_resume_running_instance_is_noop(sc: Scenario) -> None:
    """resume() of an instance that is not paused does nothing."""
    i = sc.create([{"sleep": "nap", "duration": 1000}])
    sc.wait(100)
    sc.resume(i)
    assert sc.status(i)["status"] == sc.running_status()
    sc.wait(1100)
    assert sc.finished(i)["status"] == "complete"


def test_pause_complete_instance_is_noop(sc: Scenario) -> None:
    """pause() and resume() of a complete instance change nothing."""
    i = sc.create([{"do": "a"}])
    out = sc.output(i)
    sc.pause(i)
    sc.resume(i)
    assert sc.status(i) == {"status": "complete", "output": out}


def test_terminate_sleeping_instance(sc: Scenario) -> None:
    """terminate() of a sleeping instance makes it terminated; it never completes."""
    i = sc.create([{"sleep": "nap", "duration": 1000}, {"do": "after"}])
    sc.wait(100)
    sc.terminate(i)
    assert sc.until(i, "terminated")["status"] == "terminated"
    sc.wait(1200)
    assert sc.status(i)["status"] == "terminated"


def test_terminate_paused_instance(sc: Scenario) -> None:
    """A paused instance can be terminated."""
    i = sc.create([{"sleep": "nap", "duration": 5000}])
    sc.wait(100)
    sc.pause(i)
    sc.until(i, "paused")
    sc.terminate(i)
    assert sc.until(i, "terminated")["status"] == "terminated"


def test_terminate_waiting_for_event(sc: Scenario) -> None:
    """A terminated instance stays terminated whatever is sent afterwards (whether the send
    throws: test_event_to_terminated_instance_throws)."""
    i = sc.create([{"wait": "w", "type": "go"}])
    sc.wait(100)
    sc.terminate(i)
    sc.until(i, "terminated")
    sc.call("/event", id=i, type="go")
    sc.wait(200)
    assert sc.status(i)["status"] == "terminated"


def test_terminate_complete_instance_throws(sc: Scenario) -> None:
    """terminate() of a complete instance throws cannot_terminate."""
    i = sc.create([{"do": "a"}])
    sc.output(i)
    assert sc.error("/terminate", id=i) == {"name": "Error", "message": CANNOT_TERMINATE}


def test_terminate_errored_instance_throws(sc: Scenario) -> None:
    """terminate() of an errored instance throws cannot_terminate."""
    i = sc.create([{"throw": "boom"}])
    sc.failure(i)
    assert sc.error("/terminate", id=i) == {"name": "Error", "message": CANNOT_TERMINATE}


def test_terminate_terminated_instance_throws(sc: Scenario) -> None:
    """terminate() twice: the second call throws."""
    i = sc.create([{"sleep": "nap", "duration": 5000}])
    sc.wait(100)
    sc.terminate(i)
    sc.until(i, "terminated")
    assert sc.error("/terminate", id=i) == {"name": "Error", "message": CANNOT_TERMINATE}


def test_resume_terminated_instance_stays_terminated(sc: Scenario) -> None:
    """A terminated instance cannot be resumed."""
    i = sc.create([{"sleep": "nap", "duration": 5000}])
    sc.wait(100)
    sc.terminate(i)
    sc.until(i, "terminated")
    sc.resume(i)
    sc.wait(200)
    assert sc.status(i)["status"] == "terminated"


def test_restart_complete_instance(sc: Scenario) -> None:
    """restart() of a complete instance runs it again from scratch (steps run anew)."""
    i = sc.create([{"do": "a", "ctx": True}, {"sleep": "s", "duration": 500}])
    sc.wait(500)
    first = sc.results(i)
    sc.restart(i)
    sc.wait(100)
    assert sc.status(i)["status"] != "complete"
    sc.wait(500)
    assert sc.results(i) == first


def test_restart_errored_instance(sc: Scenario) -> None:
    """restart() of an errored instance runs it again (and it errors again)."""
    i = sc.create([{"do": "a"}, {"throw": "boom"}])
    sc.failure(i)
    sc.restart(i)
    assert sc.failure(i) == {"name": "Error", "message": "boom"}


def test_restart_terminated_instance(sc: Scenario) -> None:
    """restart() of a terminated instance runs it again to completion."""
    i = sc.create([{"sleep": "nap", "duration": 1000}, {"do": "after"}])
    sc.wait(100)
    sc.terminate(i)
    sc.until(i, "terminated")
    sc.restart(i)
    sc.wait(1100)
    assert sc.results(i) == [{"slept": "nap"}, {"step": "after", "attempt": 1}]


def test_restart_sleeping_instance_starts_over(sc: Scenario) -> None:
    """restart() during a sleep begins the sleep again from its start."""
    i = sc.create([{"sleep": "nap", "duration": 1000}, {"do": "after"}])
    sc.wait(700)
    sc.restart(i)
    sc.wait(600)
    assert sc.status(i)["status"] != "complete"
    sc.wait(600)
    assert sc.results(i) == [{"slept": "nap"}, {"step": "after", "attempt": 1}]


def test_restart_resets_retry_attempts(sc: Scenario) -> None:
    """After restart() a retried step counts its attempts from 1 again."""
    config = {"retries": {"limit": 3, "delay": 200, "backoff": "constant"}}
    i = sc.create([{"do": "f", "fail": 1, "config": config}, {"wait": "w", "type": "go"}])
    sc.wait(200)
    sc.settle()
    sc.restart(i)
    sc.wait(200)
    sc.event(i, "go")
    assert sc.results(i)[0] == {"step": "f", "attempt": 2}


def test_restart_from_step_keeps_earlier_results(sc: Scenario) -> None:
    """restart({from}) keeps the results of steps before the target and reruns the rest."""
    i = sc.create(
        [{"do": "a", "returns": "date"}, {"do": "b", "ctx": True}, {"wait": "w", "type": "go"}]
    )
    sc.settle()
    sc.event(i, "go", 1)
    sc.output(i)
    sc.restart(i, **{"from": {"name": "b"}})
    sc.wait(100)
    assert sc.status(i)["status"] != "complete"
    sc.event(i, "go", 2)
    res = sc.results(i)
    assert res[1]["ctx"]["step"] == {"name": "b", "count": 1}
    assert res[2]["payload"] == 2


def test_restart_from_wait_step(sc: Scenario) -> None:
    """restart({from: {type: "waitForEvent"}}) waits for a new event."""
    i = sc.create([{"do": "a"}, {"wait": "w", "type": "go"}, {"do": "z"}])
    sc.settle()
    sc.event(i, "go", "first")
    sc.output(i)
    sc.restart(i, **{"from": {"name": "w", "type": "waitForEvent"}})
    sc.wait(200)
    assert sc.status(i)["status"] != "complete"
    sc.event(i, "go", "second")
    assert sc.results(i)[1]["payload"] == "second"


def test_restart_from_missing_step_throws(sc: Scenario) -> None:
    """restart({from}) naming a step not in the history throws cannot_restart."""
    i = sc.create([{"do": "a"}])
    sc.output(i)
    err = sc.error("/restart", id=i, body={"from": {"name": "nope"}})
    assert err["name"] == "Error"
    assert '(instance.cannot_restart) Step "nope" not found in execution history' in err["message"]


def test_restart_from_second_occurrence(sc: Scenario) -> None:
    """restart({from: {name, count: 2}}) keeps the first occurrence and reruns the second."""
    i = sc.create([{"do": "s", "value": 1}, {"do": "s", "ctx": True}, {"wait": "w", "type": "go"}])
    sc.settle()
    sc.event(i, "go")
    sc.output(i)
    sc.restart(i, **{"from": {"name": "s", "count": 2}})
    sc.settle()
    sc.event(i, "go", "again")
    res = sc.results(i)
    assert res[0] == 1
    assert res[1]["ctx"]["step"] == {"name": "s", "count": 2}
    assert res[2]["payload"] == "again"


def test_pause_during_running_attempt_waits_for_it(sc: Scenario) -> None:
    """pause() while an attempt runs gives waitingForPause, then paused once it ends."""
    config = {"retries": {"limit": 1, "delay": 100, "backoff": "constant"}, "timeout": 1500}
    i = sc.create([{"do": "slow", "hang": 1, "config": config}, {"do": "after"}])
    sc.wait(300, settle=False)
    sc.pause(i)
    assert sc.status(i)["status"] == "waitingForPause"
    sc.wait(1400, settle=False)
    sc.until(i, "paused")
    sc.resume(i)
    sc.wait(200)
    assert sc.results(i) == [{"step": "slow", "attempt": 2}, {"step": "after", "attempt": 1}]


def test_terminate_during_retry_delay(sc: Scenario) -> None:
    """terminate() during a retry delay stops the retries for good."""
    config = {"retries": {"limit": 3, "delay": 500, "backoff": "constant"}}
    i = sc.create([{"do": "f", "fail": 1, "config": config}])
    sc.wait(100)
    sc.terminate(i)
    sc.until(i, "terminated")
    sc.wait(700)
    assert sc.status(i)["status"] == "terminated"


def _send_to_finished(sc: Scenario, instance: str, status: str) -> None:
    """sendEvent to a finished instance: production throws (celld), wrangler dev accepts."""
    code, body = sc.call("/event", id=instance, type="late", body=1)
    outcome = (code, body["error"]["message"] if code == 500 else body)
    assert outcome == sc.pick(
        celld=(
            500,
            "WorkflowError: (instance.cannot_send_event) Cannot send event to instance "
            f"since it is {status}",
        ),
        wrangler=(200, {"ok": True}),
    )


@difference(wrangler=SEND_EVENT_FINISHED)
def test_event_to_errored_instance_throws(sc: Scenario) -> None:
    """sendEvent to an errored instance throws; the error stays."""
    i = sc.create([{"throw": "boom"}])
    sc.failure(i)
    _send_to_finished(sc, i, "errored")
    assert sc.status(i)["error"] == {"name": "Error", "message": "boom"}


@difference(wrangler=SEND_EVENT_FINISHED)
def test_event_to_terminated_instance_throws(sc: Scenario) -> None:
    """sendEvent to a terminated instance throws; it stays terminated."""
    i = sc.create([{"wait": "w", "type": "late"}])
    sc.settle()
    sc.terminate(i)
    sc.until(i, "terminated")
    _send_to_finished(sc, i, "terminated")
    sc.wait(100)
    assert sc.status(i)["status"] == "terminated"


@difference(wrangler=SEND_EVENT_FINISHED)
def test_event_to_complete_instance_throws(sc: Scenario) -> None:
    """sendEvent to a complete instance throws; its output stays."""
    i = sc.create([{"do": "a"}])
    before = sc.output(i)
    _send_to_finished(sc, i, "complete")
    sc.wait(100)
    assert sc.status(i)["status"] == "complete"
    assert sc.output(i) == before


def test_restart_running_instance(sc: Scenario) -> None:
    """restart() of an instance waiting for an event starts it over; it waits again."""
    i = sc.create([{"do": "a", "ctx": True}, {"wait": "w", "type": "go"}])
    sc.settle()
    sc.restart(i)
    sc.wait(100)
    assert sc.status(i)["status"] not in ("complete", "errored")
    sc.event(i, "go", "after restart")
    res = sc.results(i)
    assert res[0]["attempt"] == 1
    assert res[1]["payload"] == "after restart"
