"""Property: after every acknowledged change, the instance reloaded from the real SQLite
store equals the machine in memory; after a failed commit, memory is thrown away and
the reload equals what was last acknowledged.

Random sequences of machine operations (steps, retries, sleeps, waits, events, pause,
resume, terminate, restart, completion) run against one instance; some commits fail
(a fault raised from the store's write path, as a full disk fails them).
"""

from __future__ import annotations

import asyncio
import copy
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from celld.engine import ErrorInfo, Machine, Status, WorkflowError
from celld.store.base import InstanceRef, StoreUnavailable, Write
from celld.store.sqlite import SqliteStore

T0 = 1_700_000_000_000
REF = InstanceRef("wf", "prop")
RUNNABLE = (Status.QUEUED, Status.RUNNING, Status.WAITING_FOR_PAUSE)

OPS = st.sampled_from(
    [
        "start", "do", "succeed", "fail", "sleep", "wait", "event", "wake", "idle", "pause",
        "resume", "terminate", "restart", "restart_from", "complete", "tick",
    ]
)  # fmt: skip
STEP = st.tuples(OPS, st.integers(0, 3), st.booleans())


def durable(machine: Machine) -> tuple[Any, ...]:
    """The machine's durable records, copied (the machine goes on changing its own)."""
    return copy.deepcopy((machine.state, machine.steps(), machine.events()))


def disk_full() -> None:
    raise sqlite3.OperationalError("database or disk is full")


class Driver:
    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.now = T0

    def apply(self, op: str, n: int) -> None:
        m, now = self.machine, self.now
        name = f"s{n}"
        try:
            if op == "start" and m.status in (Status.QUEUED, Status.RUNNING, Status.WAITING):
                m.start_run(now)
            elif op == "do":
                m.step_do(name, 1, None, {"retries": {"limit": 2, "delay": 10}}, now)
            elif op in ("succeed", "fail"):
                for key, attempt in m.attempts_in_flight().items():
                    if op == "succeed":
                        m.attempt_succeeded(key, attempt, str(n), now)
                    else:
                        m.attempt_failed(key, attempt, ErrorInfo("Error", "x"), now)
                    break
            elif op == "sleep":
                m.step_sleep(name, 1, now, duration_ms=1000 * (n + 1))
            elif op == "wait":
                m.step_wait(name, 1, f"t{n % 2}", 5000, now)
            elif op == "event":
                m.send_event(f"t{n % 2}", str(n), now)
            elif op == "wake":
                m.wake(now)
            elif op == "idle":
                m.idle(now)
            elif op == "pause":
                m.pause(now)
            elif op == "resume":
                m.resume(now)
            elif op == "terminate":
                m.terminate(now)
            elif op == "restart":
                m.restart(now)
            elif op == "restart_from":
                rows = m.steps()
                if rows:
                    row = rows[n % len(rows)]
                    m.restart(now, {"name": row.name, "count": row.count, "type": row.type})
            elif op == "complete":
                m.run_succeeded(str(n), now)
            elif op == "tick":
                self.now += 700 * (n + 1)
        except WorkflowError:
            pass  # refused operations (terminate a final instance, ...) change nothing


async def run_sequence(state: Path, steps: list[tuple[str, int, bool]]) -> None:
    store = SqliteStore(state)
    await store.open()
    try:
        driver = Driver(Machine.create("wf", "prop", "{}", T0))
        acknowledged: tuple[Any, ...] | None = None
        for op, n, fails in steps:
            driver.apply(op, n)
            machine = driver.machine
            changes = machine.take_changes()
            if not changes:
                continue
            store.fault = disk_full if fails else None
            write = Write(REF, changes, machine.next_wake(), machine.status in RUNNABLE)
            try:
                await store.write(write)
            except StoreUnavailable:
                # Memory is thrown away; the store still holds what was acknowledged.
                store.fault = None
                loaded = await store.load(REF)
                if acknowledged is None:
                    assert loaded is None
                    driver.machine = Machine.create("wf", "prop", "{}", T0)
                    continue
                assert loaded is not None
                driver.machine = Machine(loaded.state, loaded.steps, loaded.events)
                driver.machine.recover(driver.now)
                assert durable(Machine(loaded.state, loaded.steps, loaded.events)) == acknowledged
                continue
            acknowledged = durable(machine)
            loaded = await store.load(REF)
            assert loaded is not None
            assert durable(Machine(loaded.state, loaded.steps, loaded.events)) == acknowledged
    finally:
        await store.close()


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(STEP, min_size=1, max_size=40))
def test_reloaded_instance_equals_memory_after_every_acknowledged_change(
    steps: list[tuple[str, int, bool]],
) -> None:
    # Faults on about one commit in eight.
    weighted = [(op, n, fails and n == 0) for op, n, fails in steps]
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run_sequence(Path(folder) / "state.sqlite3", weighted))
