"""A run's replay under another version of the Worker, checked step by step (host side of
celld.engine.versions).

While checking, JS reports every journal hit (`wf.replayed`) and a step the history lacks
is held here until the replay is quiet (JS waits on nothing but step calls, so every
`Promise.all`/`Promise.race` branch has gone as far as recorded results take it). Then
the engine's `ReplayCheck` judges: the held steps go on, or the instance fails naming
the new steps, the unasked ones and both versions. A same-version run is never checked.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celld.cells.answers import forward_outcome
from celld.engine import RunStart, StepKey
from celld.engine.state import STEP_TYPES
from celld.engine.versions import ReplayCheck
from celld.isolate.host import Later

if TYPE_CHECKING:
    from celld.cells.run import CellRun

log = logging.getLogger("celld.cells")

#: Host operations that are step calls of a run (anything else is work outside steps).
STEP_OPS = frozenset({"wf.do", "wf.attempt", "wf.sleep", "wf.wait", "wf.timer", "wf.fatal"})

#: A held step call: its key, the handler that answers it, its message and JS's answer.
Held = tuple[StepKey, Callable[[dict[str, Any]], Any], dict[str, Any], "asyncio.Future[Any]"]


def replay_check(run: CellRun, start: RunStart) -> ReplayCheck | None:
    """A check of this replay if the instance started on another version of the Worker
    and has history."""
    started, current = run.machine.state.version, run.port.version
    if started is None or current is None or started == current:
        return None
    unfinished = [r.key for r in run.machine.unfinished_steps() if r.type in STEP_TYPES]
    recorded = [StepKey.parse(k) for k in start.journal] + unfinished
    return ReplayCheck(recorded, started, current) if recorded else None


class MixedVersionReplay:
    def __init__(self, run: CellRun, check: ReplayCheck) -> None:
        self.run = run
        self.check = check
        self._held: list[Held] = []

    @property
    def done(self) -> bool:
        return self.check.done

    def replayed(self, key: StepKey) -> None:
        """JS resolved a recorded step from the journal."""
        self.check.ask(key)

    def hold(
        self, key: StepKey, handler: Callable[[dict[str, Any]], Any], m: dict[str, Any]
    ) -> Any:
        """A step the history lacks waits until the replay is quiet (its answer, a future);
        None when it may go on now."""
        if self.check.ask(key) or self.check.done:
            return None
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._held.append((key, handler, m, answer))
        return answer

    def _quiet(self) -> bool:
        """JS waits on nothing but step calls: every branch ran as far as it can."""
        return all(op in STEP_OPS for op in self.run.host.pending_ops)

    def judge(self) -> bool:
        """At a quiet point: release the held asks, or fail the instance if the new code
        left recorded steps unasked. True if the run was failed."""
        if not self._held or not self._quiet():
            return False
        run = self.run
        held, self._held = self._held, []
        found = self.check.judge(key for key, _, _, _ in held)
        if found is not None:
            for *_, answer in held:
                answer.cancel()
            ref = run.cell.ref
            log.error("workflow %s/%s: %s", ref.workflow, ref.id, found.error().message)
            if run.machine.fail_fatal(found.error(), run.port.now()) is not None:
                run.port.spawn(run.cell.settle_run(run), "failing a mixed-version replay")
            return True
        for _, handler, m, answer in held:
            self._settle(handler(m), answer)
        return False

    def _settle(self, result: Any, answer: asyncio.Future[Any]) -> None:
        if isinstance(result, Later):
            result.then(lambda outcome: forward_outcome(outcome, answer))
            return
        if not inspect.isawaitable(result):
            answer.set_result(result)
            return

        async def forward() -> None:
            try:
                answer.set_result(await result)
            except asyncio.CancelledError:
                answer.cancel()
            except Exception as error:  # noqa: BLE001 - handed to JS as the answer's error
                answer.set_exception(error)

        self.run.port.spawn(forward(), "answering a held step call", self.run.cell.on_task_failure)
