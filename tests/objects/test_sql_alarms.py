"""The SQL API, transactions, alarms on the manual clock, and objects beside workflows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from celld.cells.clock import ManualClock
from celld.server.service import Service
from tests.inprocess import call, params
from tests.objects.harness import START_MS, objects_service, rpc


async def notes(service: Service, method: str, *args: object) -> object:
    return (await rpc(service, "n", "notes." + method, *args))["value"]


async def test_sql_exec_cursors_and_sizes(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        assert await notes(service, "add", "first") == {"written": 1}
        await notes(service, "add", "second")
        assert await notes(service, "all") == {
            "columns": ["id", "body"],
            "rows": [{"id": 1, "body": "first"}, {"id": 2, "body": "second"}],
        }
        assert await notes(service, "raw") == [[1, "first"], [2, "second"]]
        assert await notes(service, "one", 2) == {"body": "second"}
        error = (await rpc(service, "n", "notes.one", 9))["error"]
        assert error["message"] == "Expected exactly one result from SQL query, but got no results."
        assert await notes(service, "blob") == [True, [1, 2, 3]]
        size = await notes(service, "size")
        assert isinstance(size, int) and size >= 4096


async def test_transaction_sync_commits_or_rolls_back(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        assert await notes(service, "count") == 0
        assert await notes(service, "atomic", True) == "undo"
        assert await notes(service, "count") == 0
        assert await notes(service, "atomic", False) == "kept"
        assert await notes(service, "count") == 1


async def test_user_sql_cannot_reach_internal_tables_or_transactions(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        missing = await notes(service, "sneaky", "SELECT * FROM _cf_KV")
        assert missing == "no such table: _cf_KV: SQLITE_ERROR"  # no key written yet
        await notes(service, "remember", "k", 1)
        denied = await notes(service, "sneaky", "SELECT * FROM _cf_KV")
        assert denied == "access to _cf_KV.key is prohibited: SQLITE_AUTH"
        assert "transactionSync()" in str(await notes(service, "sneaky", "BEGIN TRANSACTION"))
        assert await notes(service, "sneaky", "CREATE TABLE t (x); INSERT INTO t VALUES (1)") == (
            "allowed"
        )


async def test_sql_on_a_key_value_class_is_refused(tmp_path: Path) -> None:
    async with objects_service(tmp_path / "state") as service:
        # Counter is a key-value class (new_classes): reading ctx.storage.sql throws.
        error = (await rpc(service, "k", "kv", "sql"))["error"]
        assert error["message"].startswith("SQL is not enabled for this Durable Object class.")


async def settle(service: Service, clock: ManualClock, advance: int, until: object) -> None:
    """Move the clock and let the object run until `until()` is true."""
    clock.advance(advance)
    for _ in range(300):
        await asyncio.sleep(0.01)
        if until():
            return
    raise AssertionError("the object did not get there")


async def alarm_state(service: Service, name: str) -> dict[str, Any]:
    return dict((await rpc(service, name, "alarmState"))["value"])


async def state_until(service: Service, name: str, check: Any) -> dict[str, Any]:
    """The object's alarmState() once `check(state)` holds (it runs on its own meanwhile)."""
    for _ in range(1000):
        state = await alarm_state(service, name)
        if check(state):
            return state
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name} never got there: {state}")


async def test_an_alarm_fires_on_time_and_is_retried_with_backoff(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    async with objects_service(tmp_path / "state", clock) as service:
        objects = service.objects
        assert objects is not None
        at = (await rpc(service, "al", "scheduleAt", START_MS + 60_000, 2))["value"]
        assert at == START_MS + 60_000
        # Another object's alarm, a second earlier: once it has run, the queue has fired
        # every alarm due by then, and `al`'s was not one of them.
        await rpc(service, "al-earlier", "scheduleAt", START_MS + 59_000)
        await settle(service, clock, 59_000, lambda: objects.alarm_runs == 1)
        await state_until(service, "al-earlier", lambda s: len(s["runs"]) == 1)
        assert objects.alarms.fired == 1
        assert await alarm_state(service, "al") == {"runs": [], "alarm": START_MS + 60_000}
        await settle(service, clock, 1_000, lambda: objects.alarm_runs == 2)
        # Failed once: retried 2 s later, then 4 s after that.
        retry = START_MS + 60_000 + 2_000
        await state_until(service, "al", lambda s: s["alarm"] == retry)
        await settle(service, clock, 2_000, lambda: objects.alarm_runs == 3)
        await state_until(service, "al", lambda s: s["alarm"] == retry + 4_000)
        await settle(service, clock, 4_000, lambda: objects.alarm_runs == 4)
        state = await state_until(service, "al", lambda s: len(s["runs"]) == 3 and not s["alarm"])
        assert [r["retryCount"] for r in state["runs"]] == [0, 1, 2]
        assert [r["isRetry"] for r in state["runs"]] == [False, True, True]
        # getAlarm() reads null inside alarm(), and after a success the alarm is gone.
        assert all(r["during"] is None for r in state["runs"])
        assert state["alarm"] is None


async def test_an_alarm_survives_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    async with objects_service(tmp_path / "state", clock) as service:
        await rpc(service, "later", "scheduleAt", START_MS + 3_600_000)
    clock = ManualClock(START_MS + 3_600_000 + 1)
    async with objects_service(tmp_path / "state", clock) as service:
        objects = service.objects
        assert objects is not None
        await settle(service, clock, 0, lambda: objects.alarm_runs == 1)
        # the run is over once its alarm is deleted (after alarm() returned)
        state = await state_until(service, "later", lambda s: s["alarm"] is None)
        assert len(state["runs"]) == 1


async def test_a_workflow_step_calls_an_object_and_an_object_creates_a_workflow(
    tmp_path: Path,
) -> None:
    async with objects_service(tmp_path / "state") as service:
        await rpc(service, "wf", "increment", 1)
        instance = (await rpc(service, "wf", "startTally", "run-1"))["value"]
        assert instance == "run-1"
        for _ in range(500):
            status = await call(service, "tally", "status", id="run-1")
            if status["status"] in ("complete", "errored"):
                break
            await asyncio.sleep(0.02)
        assert status["status"] == "complete", status
        assert await rpc(service, "wf", "get") == {"value": 11}
        # And a workflow created from outside calls the object too.
        await call(service, "tally", "create", id="run-2", params=params({"counter": "wf"}))
        for _ in range(500):
            if (await call(service, "tally", "status", id="run-2"))["status"] == "complete":
                break
            await asyncio.sleep(0.02)
        assert await rpc(service, "wf", "get") == {"value": 21}
