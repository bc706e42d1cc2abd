"""A cell: one workflow instance, its replay machine and (while resident) its isolate.

The cell is the only writer of its instance. It turns the messages its isolate
sends into machine calls, commits what the machine changed, and only then answers
JS (commit before acknowledge). Suspended calls wait in `waiters` until an alarm,
an event or a lifecycle action settles them; a hibernated cell has no isolate and
no waiters: its next run replays from the journal.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from celld.cells.clock import Cancellable
from celld.engine import (
    Decision,
    ErrorInfo,
    Fail,
    Machine,
    Reject,
    Resolve,
    Run,
    Status,
    StepKey,
    Suspend,
)
from celld.engine.errors import missing_callback, status_error
from celld.isolate.host import AnswerWithdrawn, IsolateHost
from celld.isolate.isolate import Isolate, IsolateFault
from celld.store.base import InstanceRef, Write

if TYPE_CHECKING:
    from celld.cells.manager import CellManager, WorkflowSpec

log = logging.getLogger("celld.cells")

#: Statuses that need a run in an isolate (after a crash too).
RUNNABLE = frozenset({Status.QUEUED, Status.RUNNING, Status.WAITING_FOR_PAUSE})


def decision_wire(decision: Decision) -> dict[str, Any]:
    """The shape js/workflows/step.js reads."""
    if isinstance(decision, Resolve):
        return {"resolve": decision.value}
    if isinstance(decision, Reject):
        return {"reject": decision.error.to_dict()}
    if isinstance(decision, Run):
        return {
            "run": {
                "attempt": decision.attempt,
                "context": decision.context,
                "timeout": decision.timeout_ms,
                "willRetry": decision.will_retry,
            }
        }
    raise TypeError(f"{decision!r} is not delivered to JS")


class RunStopped(AnswerWithdrawn):
    """The run this request belonged to is over (paused, terminated, failed, evicted)."""


class Cell:
    def __init__(
        self, manager: CellManager, ref: InstanceRef, spec: WorkflowSpec, machine: Machine
    ) -> None:
        self.manager = manager
        self.ref = ref
        self.spec = spec
        self.machine = machine
        self.host: IsolateHost | None = None
        self.users = 0  # operations holding this cell loaded (see CellManager.using)
        self.starting = False  # a run is queued for an isolate slot
        self.preloading = False  # that run only brings the instance in before its deadline
        self.waiters: dict[StepKey, asyncio.Future[Decision]] = {}
        self.snapshot: dict[str, Any] = machine.status_view()
        self._timers: dict[int, Cancellable] = {}
        self._flush_lock = asyncio.Lock()
        self._stall_task: asyncio.Task[None] | None = None
        self._run_token = 0  # bumps whenever the isolate is replaced
        # Decisions taken but not yet in JS's hands (waiting for their commit): while any
        # exist, JS is not idle even if its last turn ended with nothing to do.
        self._delivering = 0
        # First attempts JS began on its own that the machine would not have started.
        self._refused_starts: dict[StepKey, Decision | None] = {}

    # -- durability --------------------------------------------------------------------

    @property
    def clock_now(self) -> int:
        return self.manager.clock.now()

    async def persist(self) -> None:
        """Return once every change made so far is committed.

        A commit in flight holds the cell loaded: were it unloaded meanwhile, the next
        operation would load a second cell for the same instance from stale rows.
        """
        self.users += 1
        try:
            async with self._flush_lock:
                changes = self.machine.take_changes()
                if not changes:
                    return
                next_wake = self.machine.next_wake()
                await self.manager.store.write(
                    Write(self.ref, changes, next_wake, self.machine.status in RUNNABLE)
                )
                self.snapshot = self.machine.status_view()
                self.manager.after_commit(self, next_wake)
        finally:
            self.users -= 1
            self.manager.cell_settled(self)

    # -- runs ---------------------------------------------------------------------------

    @property
    def resident(self) -> bool:
        return self.host is not None

    @property
    def parked(self) -> bool:
        """Resident but only waiting: safe to hibernate."""
        return (
            self.host is not None
            and self.machine.status is Status.WAITING
            and self.machine.in_flight() == 0
        )

    async def start_run(self) -> None:
        """Replay run() from the top in a fresh isolate (the manager gave us a slot).

        `starting` stays set until the isolate is in place, so the manager never unloads
        this cell halfway (a second cell for the same instance would be a second writer).
        """
        try:
            await self._start_run()
        finally:
            self.starting = False
            self.manager.cell_settled(self)

    async def _start_run(self) -> None:
        await self.drop_isolate(release=False)
        if self.machine.status not in (Status.QUEUED, Status.RUNNING, Status.WAITING):
            self.manager.release_slot(self)
            return
        self._run_token += 1
        token = self._run_token
        isolate = self.manager.warm.take()
        fresh = isolate is None
        if isolate is None:
            isolate = Isolate(self.manager.threads.pick(), self.manager.limits)
        try:
            if fresh:
                await isolate.load([self.manager.program.script])
        except Exception as error:  # noqa: BLE001 - a broken isolate fails this instance only
            await isolate.close()
            self.manager.release_slot(self)
            self.machine.start_run(self.clock_now)
            self.machine.fail(
                ErrorInfo("Error", f"could not load the Worker: {error}"), self.clock_now
            )
            await self.persist()
            return
        if token != self._run_token:  # replaced while loading
            await self.manager.recycle(isolate)
            self.manager.release_slot(self)
            return
        host = IsolateHost(isolate, self._ops(token), on_fault=lambda f: self._on_fault(token, f))
        host.turn_callback = lambda: self._after_turn(token)
        self.host = host
        start = self.machine.start_run(self.clock_now)
        if self.preloading:
            # Brought in ahead of its deadline: the replay only rebuilds the pending
            # promise, so the instance should go on reading `waiting`. What start_run
            # changed is committed with the next commit, before anything reaches JS
            # that depends on it.
            self.preloading = False
        else:
            await self.persist()
        state = self.machine.state
        host.post({"k": "env", **self.manager.env_message} if fresh else {"k": "reset"})
        host.post(
            {
                "k": "wf.start",
                "g": start.generation,
                "className": self.spec.class_name,
                "event": {
                    "payload": state.params,
                    "timestamp": state.created_at,
                    "instanceId": state.id,
                    "workflowName": state.workflow,
                },
                "journal": start.journal_json(),
                "unfinished": [
                    str(row.key)
                    for row in self.machine.steps()
                    if row.type == "do" and not row.finished
                ],
                "stepLimit": start.step_limit,
            }
        )
        self.manager.touch(self)

    async def drop_isolate(self, *, release: bool = True) -> None:
        """Forget the run in memory: the isolate, its waiters and timers (hibernate)."""
        self._run_token += 1
        for waiter in self.waiters.values():
            waiter.cancel()
        self.waiters.clear()
        self._refused_starts.clear()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._stall_task is not None:
            self._stall_task.cancel()
            self._stall_task = None
        self.machine.abandon_run()
        host, self.host = self.host, None
        if host is not None:
            if release:
                self.manager.release_slot(self)
            else:
                self.manager.resident_count -= 1
            # Whatever the run was waiting for in memory is forgotten: the alarm for its
            # next deadline (possibly already due) brings it back by replay.
            self.manager.after_commit(self, self.machine.next_wake())
            await self.manager.recycle(await host.detach())

    def _ops(self, token: int) -> dict[str, Any]:
        ops = dict(self.manager.ops)
        ops.update(
            {
                "wf.do": lambda m: self._on_do(token, m),
                "wf.begin": lambda m: self._on_begin(token, m),
                "wf.attempt": lambda m: self._on_attempt(token, m),
                "wf.sleep": lambda m: self._on_sleep(token, m),
                "wf.wait": lambda m: self._on_wait(token, m),
                "wf.timer": lambda m: self._on_timer(token, m),
                "wf.timer.cancel": lambda m: self._on_timer_cancel(m),
                "wf.done": lambda m: self._on_done(token, m),
                "wf.fatal": lambda m: self._on_fatal(token, m),
                "fault": lambda m: self._on_runtime_fault(m),
            }
        )
        return ops

    def _current(self, token: int, message: dict[str, Any]) -> bool:
        return token == self._run_token and message.get("g") == self.machine.generation

    # -- messages from the run -------------------------------------------------------------

    def _step_do(self, m: dict[str, Any]) -> tuple[StepKey, Decision | None]:
        """The machine's decision for a `step.do` call JS reported (`wf.do` or `wf.begin`)."""
        key = StepKey("do", str(m["name"]), int(m["count"]))
        decision = self.machine.step_do(
            key.name,
            key.count,
            m.get("ordinal"),
            m.get("config"),
            self.clock_now,
            dynamic_delay=bool(m.get("dynamic")),
        )
        return key, decision

    def _on_do(self, token: int, m: dict[str, Any]) -> Any:
        if not self._current(token, m):
            return self._never()
        key, decision = self._step_do(m)
        return self._answer(token, key, decision, False)

    def _on_begin(self, token: int, m: dict[str, Any]) -> None:
        """JS started a step's first attempt without asking (its config was seen before).

        The machine decides as for `wf.do`; when it would not have said "run attempt 1"
        (a pause pending, the instance failing, ...), that decision stands and answers the
        attempt's report instead (the callback ran anyway: steps are at least once).
        """
        if not self._current(token, m):
            return
        key, decision = self._step_do(m)
        if not (isinstance(decision, Run) and decision.attempt == 1):
            self._refused_starts[key] = decision

    def _on_attempt(self, token: int, m: dict[str, Any]) -> Any:
        if not self._current(token, m):
            return self._never()
        key = StepKey("do", str(m["name"]), int(m["count"]))
        if key in self._refused_starts:
            return self._answer(token, key, self._refused_starts.pop(key), False)
        attempt = int(m["attempt"])
        now = self.clock_now
        decision: Decision | None
        if m.get("unserializable"):
            decision = self.machine.attempt_unserializable(key, attempt, now)
        elif m.get("ok"):
            decision = self.machine.attempt_succeeded(key, attempt, str(m["value"]), now)
        else:
            delay_error = m.get("delayError")
            delay_timed_out = bool(m.get("delayTimedOut"))
            decision = self.machine.attempt_failed(
                key,
                attempt,
                ErrorInfo.from_dict(m.get("error") or {}),
                now,
                nonretryable=bool(m.get("nonretryable")),
                timed_out=bool(m.get("timedOut")),
                delay_ms=m.get("delay"),
                delay_error=ErrorInfo.from_dict(delay_error) if delay_error else None,
                delay_timed_out=delay_timed_out,
            )
        return self._answer(token, key, decision, True)

    def _on_sleep(self, token: int, m: dict[str, Any]) -> Any:
        if not self._current(token, m):
            return self._never()
        key = StepKey("sleep", str(m["name"]), int(m["count"]))
        decision = self.machine.step_sleep(
            key.name,
            key.count,
            self.clock_now,
            duration_ms=m.get("duration"),
            until_ms=m.get("until"),
        )
        return self._answer(token, key, decision, False)

    def _on_wait(self, token: int, m: dict[str, Any]) -> Any:
        if not self._current(token, m):
            return self._never()
        key = StepKey("waitForEvent", str(m["name"]), int(m["count"]))
        decision = self.machine.step_wait(
            key.name, key.count, m.get("type"), m.get("timeout"), self.clock_now
        )
        return self._answer(token, key, decision, False)

    def _on_timer(self, token: int, m: dict[str, Any]) -> Any:
        if token != self._run_token:
            return self._never()
        timer_id = int(m["id"])
        when = self.clock_now + max(0, int(m.get("ms") or 0))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def ring() -> None:
            self._timers.pop(timer_id, None)
            if not future.done():
                future.set_result(None)

        # A timer handle, not a task: every step.do arms one (its timeout) and nearly all are
        # cancelled at once, so a task per timer was a measurable share of a step's cost.
        self._timers[timer_id] = self.manager.clock.call_at(when, ring)
        return future

    def _on_timer_cancel(self, m: dict[str, Any]) -> None:
        timer = self._timers.pop(int(m["id"]), None)
        if timer is not None:
            timer.cancel()

    def _on_done(self, token: int, m: dict[str, Any]) -> Any:
        if not self._current(token, m):
            return None
        now = self.clock_now
        if "error" in m:
            self.machine.run_failed(ErrorInfo.from_dict(m["error"]), now)
        else:
            self.machine.run_succeeded(str(m["output"]), now)
        return self._settle_run(token)

    def _on_fatal(self, token: int, m: dict[str, Any]) -> Any:
        """step.do without a callback: thrown into run() (catchable), as wrangler dev does."""
        if not self._current(token, m):
            return self._never()
        return decision_wire(Reject(status_error(missing_callback(str(m.get("name"))))))

    def _on_runtime_fault(self, m: dict[str, Any]) -> None:
        shape = m.get("error", {})
        log.error(
            "workflow %s/%s: runtime error in %s: %s: %s",
            self.ref.workflow,
            self.ref.id,
            m.get("kind"),
            shape.get("name"),
            shape.get("message"),
        )

    # -- answering ---------------------------------------------------------------------

    @staticmethod
    def _never() -> asyncio.Future[Any]:
        """A request that will not be answered (its run is over)."""
        return asyncio.get_running_loop().create_future()

    @staticmethod
    async def _chain(first: Any, then: Any) -> Any:
        await first
        return await then

    def _answer(self, token: int, key: StepKey, decision: Decision | None, resumes: bool) -> Any:
        """Commit, then deliver `decision` (or hold it until an alarm or event settles it)."""
        if decision is None or isinstance(decision, Fail):
            # Stale, the run stopping (pause settled, terminated) or the instance failed:
            # nothing to deliver; the isolate goes once the change is committed.
            return self._chain(self._settle_run(token), self._never())
        if isinstance(decision, Suspend):
            waiter: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
            self.waiters[key] = waiter
            return self._deliver_later(token, waiter)
        if isinstance(decision, Run) and not resumes and self._run_live():
            # A step's first run acknowledges nothing durable (attempt starts are not
            # written; steps are at least once), so it is answered in the same pass: the
            # step's row rides along with the commit of the attempt's report.
            return decision_wire(decision)
        return self._deliver_now(token, decision, resumes)

    async def _deliver_now(self, token: int, decision: Decision, resumes: bool) -> dict[str, Any]:
        self._delivering += 1
        try:
            return await self._commit_then_deliver(token, decision, resumes)
        finally:
            self._delivering -= 1

    async def _commit_then_deliver(
        self, token: int, decision: Decision, resumes: bool
    ) -> dict[str, Any]:
        await self.persist()
        if token != self._run_token or not self._run_live():
            await self._settle_run(token)
            raise RunStopped()
        if resumes and self.manager.replay_every_step and self.machine.in_flight() == 0:
            await self._replay()
            raise RunStopped()
        return decision_wire(decision)

    async def _deliver_later(self, token: int, waiter: asyncio.Future[Decision]) -> dict[str, Any]:
        await self.persist()
        decision = await waiter
        while isinstance(decision, Suspend):
            decision = await waiter
        return await self._deliver_now(token, decision, True)

    def _run_live(self) -> bool:
        return self.machine.status in (Status.RUNNING, Status.WAITING, Status.WAITING_FOR_PAUSE)

    async def _settle_run(self, token: int) -> None:
        """Commit, and if the run can no longer go on, release its isolate."""
        await self.persist()
        if token == self._run_token and not self._run_live():
            await self.drop_isolate()
            self.manager.cell_settled(self)

    async def _replay(self) -> None:
        await self.drop_isolate()
        self.manager.request_run(self, wake=True)

    # -- outside events ------------------------------------------------------------------

    def _deliver_decisions(self, decisions: list[tuple[StepKey, Decision]]) -> None:
        for key, decision in decisions:
            waiter = self.waiters.pop(key, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(decision)

    async def on_alarm(self) -> None:
        """A deadline came: settle due calls of the resident run, or replay."""
        now = self.clock_now
        if self.machine.status not in (Status.RUNNING, Status.WAITING):
            return
        if self.host is None:
            if not self.starting:
                self.manager.request_run(self, wake=True)
            return
        decisions = self.machine.wake(now)
        if decisions and self.manager.replay_every_step and self.machine.in_flight() == 0:
            await self.persist()
            await self._replay()
            return
        self._deliver_decisions(decisions)
        await self.persist()

    async def send_event(self, event_type: str, payload: str) -> None:
        decisions = self.machine.send_event(event_type, payload, self.clock_now)
        await self.persist()
        if self.host is not None:
            self._deliver_decisions(decisions)
        elif (
            self.machine.status in (Status.RUNNING, Status.WAITING)
            # Hibernated and waiting for this type: the event stays buffered and the
            # replay's waitForEvent takes it.
            and self.machine.waits_for(event_type)
            and not self.starting
        ):
            self.manager.request_run(self, wake=True)

    async def pause(self) -> None:
        self.machine.pause(self.clock_now)
        await self.persist()
        if self.machine.status is Status.PAUSED:
            await self.drop_isolate()
            self.manager.cell_settled(self)

    async def resume(self) -> None:
        must_run = self.machine.resume(self.clock_now)
        await self.persist()
        if must_run:
            self.manager.request_run(self, wake=True)
        elif self.host is not None:
            self._deliver_decisions(self.machine.wake(self.clock_now))
            await self.persist()

    async def terminate(self) -> None:
        self.machine.terminate(self.clock_now)
        await self.persist()
        await self.drop_isolate()
        self.manager.cell_settled(self)

    async def restart(self, from_: dict[str, Any] | None) -> None:
        self.machine.restart(self.clock_now, from_)
        await self.persist()
        await self.drop_isolate()
        self.manager.request_run(self, wake=False)

    # -- after each turn ----------------------------------------------------------------

    def _after_turn(self, token: int) -> None:
        if token != self._run_token or self.host is None or self._delivering:
            return
        if self.machine.in_flight():
            # Not idle (idle() would do nothing); the attempt's report commits what changed.
            return
        now = self.clock_now
        self.machine.idle(now)
        asyncio.get_running_loop().create_task(self._after_idle(token))

    async def _after_idle(self, token: int) -> None:
        await self.persist()
        if token != self._run_token:
            return
        stall_at = self.machine.stall_deadline()
        if stall_at is not None and self._stall_task is None:
            self._stall_task = asyncio.get_running_loop().create_task(
                self._watch_stall(token, stall_at)
            )
        if self.parked:
            next_wake = self.machine.next_wake()
            if next_wake is None or next_wake - self.clock_now > self.manager.residency_ms:
                await self.drop_isolate()
                self.manager.cell_settled(self)
            else:
                self.manager.parked(self)  # may be hibernated for a queued run

    async def _watch_stall(self, token: int, when: int) -> None:
        try:
            while token == self._run_token:
                await self.manager.clock.sleep_until(when)
                if token != self._run_token:
                    return
                if self._delivering:
                    # An answer is on its way to JS; look again once it has landed.
                    await asyncio.sleep(0.01)
                    continue
                if self.machine.check_stalled(self.clock_now) is not None:
                    await self._settle_run(token)
                    return
                next_deadline = self.machine.stall_deadline()
                if next_deadline is None:
                    return
                when = next_deadline
        finally:
            if self._stall_task is asyncio.current_task():
                self._stall_task = None

    def _on_fault(self, token: int, fault: IsolateFault) -> None:
        """The isolate hit a limit: fail the attempts it was running, or the instance."""
        if token != self._run_token:
            return
        detail = self.manager.program.lines.rewrite(fault.detail)
        log.error(
            "workflow %s/%s: isolate stopped (%s)\n%s",
            self.ref.workflow,
            self.ref.id,
            fault.reason,
            detail,
        )
        error = ErrorInfo("Error", f"Workflow exceeded a limit: {fault.reason}")
        asyncio.get_running_loop().create_task(self._recover_from_fault(token, error))

    async def _recover_from_fault(self, token: int, error: ErrorInfo) -> None:
        now = self.clock_now
        attempts = self.machine.attempts_in_flight()
        if attempts:
            for key, attempt in attempts.items():
                self.machine.attempt_failed(key, attempt, error, now)
        else:
            self.machine.run_failed(error, now)
        await self.persist()
        await self.drop_isolate()
        if self._run_live():
            self.manager.request_run(self, wake=True)
        else:
            self.manager.cell_settled(self)
