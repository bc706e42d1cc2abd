"""A rollback run (the machine is rolling back, :mod:`celld.engine.rollback`), host side.

The run replays `run()` only so that JS finds the rollback handlers again; once that
replay's first turn is over, the driver asks the machine for each handler attempt in
turn (`wf.rollback`), and commits each report (`wf.rbReport`) before the next: a handler
that finished never runs again, one cut off by a crash runs again in the next process.
A retry delay longer than the residency window hibernates the run; the alarm starts a
new one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celld.cells.answers import failure_keywords
from celld.engine import ErrorInfo, Run, StepKey
from celld.store.base import StoreUnavailable

if TYPE_CHECKING:
    from celld.cells.run import CellRun


class RollbackDriver:
    def __init__(self, run: CellRun) -> None:
        self.run = run
        self.started = False

    def after_turn(self) -> None:
        """The replay's first turn is over: JS has found the handlers it can."""
        run = self.run
        if not run.closed and not self.started:
            self.started = True
            run.port.spawn(self.drive(), "rolling back", run.cell.on_task_failure)

    async def drive(self) -> None:
        """Commit what changed, then start the next handler attempt, or end the run once
        the rollback is over. A retry delay is left to the alarm (`Cell.on_alarm`)."""
        run = self.run
        machine, port, cell = run.machine, run.port, run.cell
        if run.closed or not self.started:
            return
        if machine.rollback_in_flight() is not None:
            return  # an attempt is out; its report drives the next step
        decision = machine.rollback_next(port.now())
        try:
            await cell.commit()
        except StoreUnavailable:
            return  # the cell broke: it is reloaded from the store and goes on
        if run.closed:
            return
        if isinstance(decision, Run):
            in_flight = machine.rollback_in_flight()
            assert in_flight is not None
            key, attempt = in_flight
            run.attempts.arm(key, decision)
            run.host.post(
                {"k": "wf.rollback", "g": machine.generation, "key": str(key),
                 "attempt": attempt, "context": decision.context,
                 "timeout": decision.timeout_ms, "willRetry": decision.will_retry}
            )  # fmt: skip
        elif decision is None:
            await cell.settle_run(run)
        elif decision.until is not None and (
            decision.until - port.now() > port.settings.residency_ms
        ):
            # A long retry delay: hibernate; the alarm starts a new rollback run.
            await cell.stop_run()

    def on_report(self, m: dict[str, Any]) -> Any:
        """A handler attempt reported (`wf.rbReport`)."""
        machine = self.run.machine
        key = StepKey.parse(str(m["key"]))
        attempt = int(m["attempt"])
        self.run.attempts.reported(key)
        now = self.run.port.now()
        if m.get("missing"):
            machine.rollback_missing(key, now)
        elif m.get("ok"):
            machine.rollback_attempt_succeeded(key, attempt, now)
        else:
            error = ErrorInfo.from_dict(m.get("error") or {})
            machine.rollback_attempt_failed(key, attempt, error, now, **failure_keywords(m))
        return self.drive()
