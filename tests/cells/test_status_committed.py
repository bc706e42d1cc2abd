"""A status read shows what is committed, never a change still on its way to the store:
a run's start commits with what its first turn asks to commit (the first step's result,
say) while JS runs on, so the machine in memory may already be `waiting` while a write
that says `running` is the last one landed."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from celld.engine import Status
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service

SLEEPER = {
    "ops": [
        {"do": "first", "value": 1},
        {"sleep": "nap", "duration": "10 minutes"},
        {"do": "after", "value": 1},
    ]
}


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
        # the writer holds every commit after the create's until the test lets it go
        gates = [threading.Event() for _ in range(8)]
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

            await _until(lambda: len(commits) == 2, "the start's write reached the writer")
            status = await call(service, "script-workflow", "status", id="s")
            assert status["status"] == "queued"  # only the create is committed
            # Let writes land one at a time until the sleep is taken in memory while its
            # write is held (the start, with or without the first step, has landed).
            held = 2
            while not waiting_in_memory():
                gates[held - 1].set()
                await _until(lambda n=held: len(commits) == n + 1, f"commit {held + 1}")
                held += 1
            assert held >= 3
            status = await call(service, "script-workflow", "status", id="s")
            assert status["status"] == "running"  # not the `waiting` still in flight
            for gate in gates:
                gate.set()
            await _until(
                lambda: service.cells.loaded(ref).snapshot["status"] == "waiting",  # type: ignore[union-attr]
                "the sleep's write landed",
            )
        finally:
            store.fault = None  # type: ignore[attr-defined]
            for gate in gates:
                gate.set()
