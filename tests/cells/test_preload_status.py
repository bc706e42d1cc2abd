"""An instance paged in ahead of its deadline (a sleep inside the residency window) replays
to its sleep without ever reading `running`: Cloudflare shows such an instance `waiting`
until the sleep ends. The preload's replay changes nothing and logs nothing."""

from __future__ import annotations

from pathlib import Path

from celld.cells.clock import ManualClock
from celld.engine import Status
from celld.store.base import InstanceRef
from tests.inprocess import call, params, running_service, until

DAY = 86_400_000
START = 1_700_000_000_000
SLEEPER = {
    "ops": [
        {"do": "a", "value": 1},
        {"sleep": "nap", "duration": "1 day"},
        {"do": "b", "value": 2},
    ]
}


async def test_a_preloaded_instance_reads_waiting_throughout(tmp_path: Path) -> None:
    clock = ManualClock(START)
    async with running_service(tmp_path / "state", clock=clock) as service:
        cells, store = service.cells, service.store
        assert cells is not None and store is not None
        ref = InstanceRef("script-workflow", "sleeper")
        await call(service, ref.workflow, "create", id=ref.id, params=params(SLEEPER))
        # it runs to its day-long sleep and hibernates (the deadline is past the window)
        await until(
            lambda: cells.loaded(ref) is None and cells.residency.queue.priority(ref) is None,
            "the sleeper hibernated",
        )
        assert (await call(service, ref.workflow, "status", id=ref.id))["status"] == "waiting"
        logged = [row.type for row in await store.log_after(ref, 0, 1000)]
        assert logged[-2:] == ["sleep_started", "workflow_waiting"]

        # The deadline comes inside the residency window: the horizon scan pages the
        # instance in ahead of time, and its replay runs to the sleep again.
        seen: list[str] = []

        def resident_and_parked() -> bool:
            cell = cells.loaded(ref)
            if cell is not None:
                seen.append(cell.machine.status.value)
                seen.append(cell.snapshot["status"])
            return cell is not None and cell.run is not None and cell.parked

        clock.advance(DAY - 60_000)
        await until(resident_and_parked, "the sleeper was paged in ahead of its deadline")
        cell = cells.loaded(ref)
        assert cell is not None and cell.machine.status is Status.WAITING
        assert set(seen) == {"waiting"}, seen
        assert (await call(service, ref.workflow, "status", id=ref.id))["status"] == "waiting"
        # nothing was written for the replay: no running/waiting pair in the log
        assert [row.type for row in await store.log_after(ref, 0, 1000)] == logged
        rows = await store._fetch(  # type: ignore[attr-defined]
            "SELECT status FROM instances WHERE workflow = ? AND id = ?", (ref.workflow, ref.id)
        )
        assert rows[0]["status"] == "waiting"

        # the deadline: it runs on from the resident run, running then complete
        clock.advance(60_000)
        await until(
            lambda: (c := cells.loaded(ref)) is None or c.snapshot["status"] == "complete",
            "the sleeper completed",
        )
        status = await call(service, ref.workflow, "status", id=ref.id)
        assert status["status"] == "complete"
        tail = [row.type for row in await store.log_after(ref, 0, 1000)][len(logged) :]
        assert tail[:2] == ["workflow_running", "sleep_completed"], tail
        assert tail[-1] == "workflow_completed"
