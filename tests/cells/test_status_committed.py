"""A status read shows what is committed, never a change still on its way to the store:
a run's start commits while its first turn runs, so the machine in memory may already be
`waiting` when the start's write (status `running`) lands."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from celld.engine import Status
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service

SLEEPER = {"ops": [{"sleep": "nap", "duration": "10 minutes"}, {"do": "after", "value": 1}]}


async def _until(condition: Any, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")


async def test_status_waits_for_the_write_that_holds_it(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state") as service:
        assert service.cells is not None and service.store is not None
        store = service.store
        # the writer holds its 2nd and 3rd commits (the run's start, then its sleep)
        gates = [threading.Event() for _ in range(3)]
        gates[0].set()  # the create's own commit goes through
        commits: list[int] = []

        def hold() -> None:  # on the writer thread, before each commit
            commits.append(1)
            if len(commits) <= len(gates):
                gates[len(commits) - 1].wait(30)

        store.fault = hold  # type: ignore[attr-defined]
        try:
            await call(service, "script-workflow", "create", id="s", params=params(SLEEPER))
            ref = InstanceRef("script-workflow", "s")

            def waiting_in_memory() -> bool:
                cell = service.cells.loaded(ref)  # type: ignore[union-attr]
                return cell is not None and cell.machine.status is Status.WAITING

            await _until(lambda: waiting_in_memory() and len(commits) == 2, "JS reached the sleep")
            status = await call(service, "script-workflow", "status", id="s")
            assert status["status"] == "queued"  # only the create is committed
            gates[1].set()  # the start lands (running); the sleep's write is held
            await _until(lambda: len(commits) == 3, "the sleep's write reached the writer")
            status = await call(service, "script-workflow", "status", id="s")
            assert status["status"] == "running"  # not the `waiting` still in flight
            gates[2].set()
            await _until(
                lambda: service.cells.loaded(ref).snapshot["status"] == "waiting",  # type: ignore[union-attr]
                "the sleep's write landed",
            )
        finally:
            store.fault = None  # type: ignore[attr-defined]
            for gate in gates:
                gate.set()
