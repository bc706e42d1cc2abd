"""One run of an instance's `run()` in an isolate: the step protocol, host side.

The run turns what its isolate reports (`wf.do`, `wf.begin`, `wf.attempt`, `wf.sleep`,
`wf.wait`, `wf.done`) into machine calls, has the cell commit what the machine changed,
and only then answers JS (commit before acknowledge). Calls the machine suspends wait
here until an alarm, an event or a lifecycle action settles them.

A step's answer is a `Later` (celld.isolate.host) settled from the callback of the
commit that holds its result (`Cell.commit_soon`): no task or future per step, and the
answers of every instance in one group commit go to JS in one pass.

The host also keeps time for the run: every attempt handed to JS gets a deadline (the
engine's `Run.timeout_ms`), and one timer per run waits for the earliest; past it, an
attempt still in flight is told (`wf.timeout`), and JS abandons it and reports it as
timed out. Nothing else is armed per step: no task, no message, no promise left behind.

In test mode an instance may have test modifiers (celld.cells.modifiers): the run
consults them when a step is called and before an attempt is handed to JS, and records
what they cause through the same machine calls a real outcome takes (a mocked result is
a successful attempt, so replay returns it). Such a run never starts attempts
speculatively: every attempt is decided here first.

A run object lives as long as its isolate serves this instance; once closed, every
message it still receives is dropped, so an old run can never touch a newer one.

A *rollback run* (the machine is rolling back, :mod:`celld.engine.rollback`) replays
`run()` only so that JS finds the rollback handlers again; once that replay's first turn
is over, the run asks the machine for each handler attempt in turn (`wf.rollback`), and
commits each report (`wf.rbReport`) before the next: a handler that finished never runs
again, one cut off by a crash runs again in the next process.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from celld.cells.clock import Cancellable
from celld.cells.modifiers import Modifiers
from celld.cells.wire import decision_wire
from celld.engine import (
    Decision,
    ErrorInfo,
    Fail,
    Reject,
    Resolve,
    Run,
    RunStart,
    Status,
    StepKey,
    Suspend,
)
from celld.engine.errors import missing_callback, status_error
from celld.engine.state import STEP_TYPES
from celld.engine.versions import ReplayCheck
from celld.isolate.gate import PendingWrite
from celld.isolate.host import AnswerWithdrawn, IsolateHost, Later, Outcome
from celld.isolate.isolate import IsolateFault, RawJson
from celld.project.cron import parse_scheduled_id
from celld.store.base import StoreUnavailable

if TYPE_CHECKING:
    from celld.cells.cell import Cell

log = logging.getLogger("celld.cells")


class RunStopped(AnswerWithdrawn):
    """The run this request belonged to is over (paused, terminated, failed, evicted)."""


def _failure(m: dict[str, Any]) -> dict[str, Any]:
    """How a failed attempt went, from its report (`attemptOnce` in js/workflows/step.js),
    as the machine's `attempt_failed` / `rollback_attempt_failed` keywords."""
    delay_error = m.get("delayError")
    return {
        "nonretryable": bool(m.get("nonretryable")),
        "timed_out": bool(m.get("timedOut")),
        "delay_ms": m.get("delay"),
        "delay_error": ErrorInfo.from_dict(delay_error) if delay_error else None,
        "delay_timed_out": bool(m.get("delayTimedOut")),
    }


def _fail(answer: Later, error: BaseException) -> None:
    """A commit failed under `answer`: a store failure broke the cell (it is reloaded from
    the store and this run is over: nothing is delivered); anything else goes to JS."""
    if isinstance(error, StoreUnavailable) or not isinstance(error, Exception):
        answer.withdraw()
    else:
        answer.reject(error)


def _forward_outcome(outcome: Outcome, answer: asyncio.Future[Any]) -> None:
    """A held call's answer: what its `Later` settled with."""
    if answer.done():
        return
    kind, value = outcome
    if kind == "v":
        answer.set_result(value)
    elif kind == "e":
        answer.set_exception(value)
    else:
        answer.set_exception(RunStopped())


def _never() -> asyncio.Future[Any]:
    """A request that will not be answered (its run is over)."""
    return asyncio.get_running_loop().create_future()


#: Host operations that are step calls of a run (anything else is work outside steps).
STEP_OPS = frozenset({"wf.do", "wf.attempt", "wf.sleep", "wf.wait", "wf.timer", "wf.fatal"})
#: Messages that only tell the engine what the run does next: dispatching them acts on
#: nothing outside celld (what they change is committed before JS hears back).
INWARD_OPS = frozenset({"wf.do", "wf.begin", "wf.attempt", "wf.sleep", "wf.wait", "wf.done"})


class CellRun:
    def __init__(self, cell: Cell, host: IsolateHost) -> None:
        self.cell = cell
        self.machine = cell.machine
        self.port = cell.port
        self.host = host
        self.closed = False
        self.waiters: dict[StepKey, asyncio.Future[Decision]] = {}
        #: deadline (ms) and attempt number of each attempt in flight, and the one timer
        #: armed for the earliest of them (a handle per attempt cost a heap entry each)
        self._deadlines: dict[StepKey, tuple[int, int]] = {}
        self._deadline_timer: Cancellable | None = None
        self._deadline_at: int | None = None
        self._stall_timer: Cancellable | None = None
        # Decisions taken but not yet in JS's hands (waiting for their commit): while any
        # exist, JS is not idle even if its last turn ended with nothing to do.
        self._delivering = 0
        #: CPU charged to each attempt in flight (ms): its own budget is `limits.cpu_ms`
        self._attempt_cpu: dict[StepKey, float] = {}
        #: this run only runs rollback handlers (set by post_start)
        self.rollback_mode = False
        self._rollback_started = False
        #: version pinning: set while a replay under another version is being checked
        self._check: ReplayCheck | None = None
        #: fresh step asks held until the replay is quiet (key, handler, message, answer)
        self._held: list[tuple[StepKey, Any, dict[str, Any], asyncio.Future[Any]]] = []
        #: a step's result was answered ahead of its commit, which has not landed yet
        self._early = False
        host.ops = {**host.ops, **self._ops()}
        host.inward_ops = INWARD_OPS
        host.inward_stream = cell
        host.turn_callback = self._after_turn
        host.cpu_callback = self._charge_cpu

    def _ops(self) -> dict[str, Any]:
        return {
            "wf.do": self._on_do,
            "wf.begin": self._on_begin,
            "wf.attempt": self._on_attempt,
            "wf.sleep": self._on_sleep,
            "wf.wait": self._on_wait,
            "wf.timer": self._on_timer,
            "wf.replayed": self._on_replayed,
            "wf.done": self._on_done,
            "wf.fatal": self._on_fatal,
            "wf.rbReport": self._on_rollback_report,
            "fault": self._on_runtime_fault,
        }

    # -- starting and stopping ----------------------------------------------------------

    def post_start(self, start: RunStart, fresh: bool) -> None:
        """Hand the run's start (from `Machine.start_run`) to JS."""
        state = self.machine.state
        # a rollback run only replays to find handlers: nothing new runs, nothing to check
        self._check = None if start.rollback is not None else self._version_check(start)
        env = {"k": "env", **self.port.settings.env_message} if fresh else {"k": "reset"}
        self.host.post(env)
        self.host.post(
            {
                "k": "wf.start",
                "g": start.generation,
                "className": self.cell.spec.class_name,
                "event": {
                    "payload": state.params,
                    "timestamp": state.created_at,
                    "instanceId": state.id,
                    "workflowName": state.workflow,
                    "schedule": self._schedule(state.id),
                },
                # as raw JSON inside the message: JS parses it once, with the message
                "journal": RawJson(start.journal_json()),
                "unfinished": [
                    str(row.key) for row in self.machine.unfinished_steps() if row.type == "do"
                ],
                "stepLimit": start.step_limit,
                # no speculative starts under test modifiers, nor while a replay under
                # another version is checked (every step goes through the host and JS
                # reports journal hits)
                "speculate": self.modifiers() is None and self._check is None,
                "rollback": start.rollback,
                "checkVersion": self._check is not None,
            }
        )
        self.rollback_mode = start.rollback is not None

    def _version_check(self, start: RunStart) -> ReplayCheck | None:
        """A check of this replay if the instance started on another version of the Worker
        and has history (celld.engine.versions)."""
        started, current = self.machine.state.version, self.port.version
        if started is None or current is None or started == current:
            return None
        unfinished = [r.key for r in self.machine.unfinished_steps() if r.type in STEP_TYPES]
        recorded = [StepKey.parse(k) for k in start.journal] + unfinished
        return ReplayCheck(recorded, started, current) if recorded else None

    # -- version pinning -------------------------------------------------------------------

    def _on_replayed(self, m: dict[str, Any]) -> None:
        """JS resolved a recorded step from the journal (reported only while checking)."""
        if self._check is not None and self._current(m):
            self._check.ask(StepKey.parse(str(m["key"])))

    def _held_ask(self, key: StepKey, handler: Any, m: dict[str, Any]) -> Any:
        """While checking: a step the history lacks waits until the replay is quiet."""
        check = self._check
        if check is None or check.ask(key) or check.done:
            return None
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._held.append((key, handler, m, answer))
        return answer

    def _quiet(self) -> bool:
        """JS waits on nothing but step calls: every branch ran as far as it can."""
        return all(op in STEP_OPS for op in self.host.pending_ops)

    def _judge_held(self) -> bool:
        """At a quiet point: release the held asks, or fail the instance if the new code
        left recorded steps unasked. True if the run was failed."""
        check = self._check
        if check is None or not self._held or not self._quiet():
            return False
        held, self._held = self._held, []
        found = check.judge(key for key, _, _, _ in held)
        if found is not None:
            for *_, answer in held:
                answer.cancel()
            ref = self.cell.ref
            log.error("workflow %s/%s: %s", ref.workflow, ref.id, found.error().message)
            if self.machine.fail_fatal(found.error(), self.port.now()) is not None:
                self.port.spawn(self.cell.settle_run(self), "failing a mixed-version replay")
            return True
        if check.done:
            self._check = None
        for _, handler, m, answer in held:
            self._settle_held(handler(m), answer)
        return False

    def _settle_held(self, result: Any, answer: asyncio.Future[Any]) -> None:
        if isinstance(result, Later):
            result.then(lambda outcome: _forward_outcome(outcome, answer))
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

        self.port.spawn(forward(), "answering a held step call", self.cell.on_task_failure)

    @staticmethod
    def _schedule(instance_id: str) -> dict[str, Any] | None:
        """`event.schedule` of an instance a cron schedule started: {cron, scheduledTime}."""
        found = parse_scheduled_id(instance_id)
        return None if found is None else {"cron": found[0], "scheduledTime": found[1]}

    def close(self) -> None:
        """Forget the run in memory (its waiters, timers and pending calls); the caller
        detaches the isolate. Durable rows are untouched: the next run replays them."""
        if self.closed:
            return
        self.closed = True
        for waiter in self.waiters.values():
            waiter.cancel()
        self.waiters.clear()
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_timer = self._deadline_at = None
        self._deadlines.clear()
        self._attempt_cpu.clear()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        self.host.turn_callback = None
        self.machine.abandon_run()

    @property
    def live(self) -> bool:
        if self.closed:
            return False
        if self.rollback_mode:
            return self.machine.rolling_back
        return not self.machine.rolling_back and self.machine.status in (
            Status.RUNNING,
            Status.WAITING,
            Status.WAITING_FOR_PAUSE,
        )

    @property
    def parked(self) -> bool:
        """Only waiting: safe to hibernate."""
        return (
            not self.closed
            and self.machine.status is Status.WAITING
            and self.machine.in_flight() == 0
            and not self._delivering
            # an answer already handed to the host (a race's winning step, say) that JS
            # has not run yet: JS may go on from it
            and not self.host.turn_pending
        )

    def _current(self, message: dict[str, Any]) -> bool:
        return not self.closed and message.get("g") == self.machine.generation

    # -- lifecycle hooks used by the cell ---------------------------------------------------

    def at_turn_boundary(self, change: Any) -> asyncio.Future[None]:
        """Apply `change()` between two turns (see IsolateHost.at_turn_boundary)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def apply() -> None:
            try:
                change()
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting caller
                done.set_exception(error)
                return
            done.set_result(None)

        self.host.at_turn_boundary(apply)
        return done

    def hold(self) -> None:
        """A pause is pending: JS must not start attempts on its own any more."""
        self.host.post({"k": "wf.hold", "g": self.machine.generation})

    def release_hold(self) -> None:
        if self.modifiers() is None:  # a modified run never speculates
            self.host.post({"k": "wf.release", "g": self.machine.generation})

    # -- test modifiers ------------------------------------------------------------------------

    def modifiers(self) -> Modifiers | None:
        registry = self.port.settings.introspection
        return registry.get(self.cell.ref) if registry is not None else None

    def modified(self) -> None:
        """The instance got modifiers while this run is live (call at a turn boundary):
        from now on JS asks before every attempt, so each can be mocked."""
        self.hold()

    def _modify(self, key: StepKey, decision: Decision | None) -> tuple[Decision | None, bool]:
        """Apply the modifiers to a `step.do` decision: attempts about to run that are
        mocked are reported as their mock says, and retries whose delay is disabled start
        now, until an attempt must really run or the step is settled. Returns the
        decision and whether anything was recorded."""
        modifiers = self.modifiers()
        acted = False
        if modifiers is None or key.type != "do":
            return decision, acted
        while self.live:
            now = self.port.now()
            if isinstance(decision, Suspend) and decision.until is not None:
                if not modifiers.retry_delay_disabled(key.name, key.count):
                    break
                cut = self.machine.cut_short(key, now)
                if cut is None:
                    break
                decision = cut
            elif isinstance(decision, Run):
                mocked = modifiers.attempt(key.name, key.count, decision.attempt)
                if mocked is None:
                    break
                if mocked.kind == "result":
                    assert mocked.value is not None
                    decision = self.machine.attempt_succeeded(
                        key, decision.attempt, mocked.value, now
                    )
                else:
                    decision = self.machine.attempt_failed(
                        key,
                        decision.attempt,
                        mocked.error,
                        now,
                        timed_out=mocked.kind == "timeout",
                    )
            else:
                break
            acted = True
        return decision, acted

    def _cut_short_if(self, key: StepKey, decision: Decision | None, wanted: bool) -> Any:
        """A sleep or wait the modifiers end at once (when `wanted`)."""
        if wanted and isinstance(decision, Suspend):
            return self.machine.cut_short(key, self.port.now()) or decision
        return decision

    def deliver(self, decisions: list[tuple[StepKey, Decision]]) -> None:
        """Settle suspended calls (after an alarm, an event, a cancelled pause)."""
        for key, decision in decisions:
            waiter = self.waiters.pop(key, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(decision)

    # -- messages from the run -----------------------------------------------------------

    def _key(self, step_type: str, m: dict[str, Any]) -> StepKey:
        return StepKey(step_type, str(m["name"]), int(m["count"]))

    def _step_call(self, decide: Any, m: dict[str, Any]) -> tuple[StepKey, Decision | None]:
        """A `step.do` call JS reported, decided by `decide` (`step_do` or `step_begin`)."""
        key = self._key("do", m)
        decision = decide(
            key.name,
            key.count,
            m.get("ordinal"),
            m.get("config"),
            self.port.now(),
            dynamic_delay=bool(m.get("dynamic")),
            rollback=m.get("rollback"),
        )
        return key, decision

    def _on_do(self, m: dict[str, Any]) -> Any:
        if not self._current(m):
            return _never()
        held = self._held_ask(self._key("do", m), self._do_now, m)
        return held if held is not None else self._do_now(m)

    def _do_now(self, m: dict[str, Any]) -> Any:
        key, decision = self._step_call(self.machine.step_do, m)
        decision, mocked = self._modify(key, decision)
        return self._answer(key, decision, resumes=mocked)

    def _on_begin(self, m: dict[str, Any]) -> None:
        """JS started attempt 1 on its own; the engine accepts or refuses the start."""
        if not self._current(m):
            return
        key, decision = self._step_call(self.machine.step_begin, m)
        if isinstance(decision, Run) and decision.attempt == 1:
            self._arm_timeout(key, decision)

    def _on_attempt(self, m: dict[str, Any]) -> Any:
        if not self._current(m):
            return _never()
        key = self._key("do", m)
        attempt = int(m["attempt"])
        self._reported(key)
        now = self.port.now()
        decision: Decision | None
        if m.get("unserializable"):
            decision = self.machine.attempt_unserializable(key, attempt, now)
        elif m.get("ok"):
            decision = self.machine.attempt_succeeded(key, attempt, str(m["value"]), now)
        else:
            error = ErrorInfo.from_dict(m.get("error") or {})
            decision = self.machine.attempt_failed(key, attempt, error, now, **_failure(m))
        decision, _ = self._modify(key, decision)
        if self._may_answer_early(decision):
            return self._answer_early(key, decision)
        return self._answer(key, decision, resumes=True)

    # A step's result answered ahead of its commit. JS goes on at once; the isolate's
    # output gate (celld/isolate/gate.py) is told of the write first, so nothing JS sends
    # from then on leaves before the write lands (a fetch, a binding call, a log line, a
    # later run of the same isolate), except what only tells the engine what this run
    # does next (the next step's start and result, a sleep, the run's end): that goes
    # into the same write, which is held until the turn that sees the answer is
    # dispatched. Readers see the status only as written. A crash before it lands loses
    # nothing acknowledged: the step runs again. So the run's end commits with its last
    # step's result, a sleeper's sleep with the step before it, and a run of steps in
    # about half as many commits.

    def _may_answer_early(self, decision: Decision | None) -> bool:
        return (
            isinstance(decision, Resolve)
            and not self._early
            and not self._delivering
            and self.live
            and not self.rollback_mode
            and self._check is None
            and self.machine.in_flight() == 0
            and not self.host.faulted
            and not self.port.settings.replay_every_step
            and self.modifiers() is None
        )

    def _answer_early(self, key: StepKey, decision: Decision) -> dict[str, Any]:
        self._early = True
        self._delivering += 1
        pending = PendingWrite(self.cell)
        self.host.gate.told(pending)
        self.cell.hold_writes()
        self.cell.commit_soon(lambda error: self._early_committed(pending, error))
        self.host.after_turn_seeing(self.cell.release_writes)
        return self._hand_over(key, decision)

    def _early_committed(self, pending: PendingWrite, error: BaseException | None) -> None:
        self._early = False
        self._delivering -= 1
        if error is not None:
            pending.failed(error)  # what waited at the gate is dropped with the isolate
            # JS already has the answer: this run cannot go on. A store failure broke the
            # cell already; anything else does now (the store's rows are the truth).
            if not isinstance(error, StoreUnavailable) and not self.cell.deleted:
                self.cell.break_(error)
            return
        held = self.host.gate.waiting
        pending.landed()  # what waited goes on; the last of it tells `_after_turn`
        if not self.closed and not held and not self.host.turn_pending:
            self._after_turn()

    def _reported(self, key: StepKey) -> None:
        """An attempt of `key` reported back: its timer and CPU account go."""
        self._deadlines.pop(key, None)  # the timer finds it gone
        self._attempt_cpu.pop(key, None)

    def _on_sleep(self, m: dict[str, Any]) -> Any:
        if not self._current(m):
            return _never()
        held = self._held_ask(self._key("sleep", m), self._sleep_now, m)
        return held if held is not None else self._sleep_now(m)

    def _sleep_now(self, m: dict[str, Any]) -> Any:
        key = self._key("sleep", m)
        decision = self.machine.step_sleep(
            key.name,
            key.count,
            self.port.now(),
            duration_ms=m.get("duration"),
            until_ms=m.get("until"),
        )
        modifiers = self.modifiers()
        disabled = modifiers is not None and modifiers.sleep_disabled(key.name, key.count)
        decision = self._cut_short_if(key, decision, disabled)
        return self._answer(key, decision, resumes=False)

    def _on_wait(self, m: dict[str, Any]) -> Any:
        if not self._current(m):
            return _never()
        held = self._held_ask(self._key("waitForEvent", m), self._wait_now, m)
        return held if held is not None else self._wait_now(m)

    def _wait_now(self, m: dict[str, Any]) -> Any:
        key = self._key("waitForEvent", m)
        decision = self.machine.step_wait(
            key.name, key.count, m.get("type"), m.get("timeout"), self.port.now()
        )
        modifiers = self.modifiers()
        forced = modifiers is not None and modifiers.event_timeout(key.name, key.count)
        decision = self._cut_short_if(key, decision, forced)
        return self._answer(key, decision, resumes=False)

    def _on_timer(self, m: dict[str, Any]) -> Any:
        """A delay function's time limit (asked only when an attempt failed and its config
        has a delay function): a timer handle the JS side can withdraw."""
        if self.closed:
            return _never()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handle = self.port.clock.call_at(
            self.port.now() + max(0, int(m.get("ms") or 0)),
            lambda: None if future.done() else future.set_result(None),
        )
        future.add_done_callback(lambda f: handle.cancel() if f.cancelled() else None)
        return future

    def _on_done(self, m: dict[str, Any]) -> Any:
        if not self._current(m):
            return None
        now = self.port.now()
        if "error" in m:
            self.machine.run_failed(ErrorInfo.from_dict(m["error"]), now)
        else:
            self.machine.run_succeeded(str(m["output"]), now)
        return self.cell.settle_run(self)

    def _on_fatal(self, m: dict[str, Any]) -> Any:
        """step.do without a callback: thrown into run() (catchable), as wrangler dev does."""
        if not self._current(m):
            return _never()
        return decision_wire(Reject(status_error(missing_callback(str(m.get("name"))))))

    def _on_runtime_fault(self, m: dict[str, Any]) -> None:
        shape = m.get("error", {})
        ref = self.cell.ref
        log.error(
            "workflow %s/%s: runtime error in %s: %s: %s",
            ref.workflow,
            ref.id,
            m.get("kind"),
            shape.get("name"),
            shape.get("message"),
        )

    # -- answering -------------------------------------------------------------------------

    def _answer(self, key: StepKey, decision: Decision | None, *, resumes: bool) -> Any:
        """Commit, then deliver `decision` (or hold it until an alarm or event settles it)."""
        if decision is None or isinstance(decision, Fail) or not self.live:
            # Stale, the run stopping (pause settled, terminated) or the instance failed:
            # nothing to deliver; the isolate goes once the change is committed.
            return self._withdrawn(self.cell.settle_run(self))
        if isinstance(decision, Suspend):
            waiter: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
            self.waiters[key] = waiter
            answer = Later()
            self.cell.commit_soon(lambda error: self._suspended(key, waiter, answer, error))
            return answer
        if isinstance(decision, Run) and not resumes and self.live:
            # A step's first run acknowledges nothing durable (attempt starts are not
            # written; steps are at least once), so it is answered in the same pass: the
            # step's row rides along with the commit of the attempt's report. (While a
            # result before it waits for its commit, what the callback sends waits at
            # the isolate's output gate.)
            return self._hand_over(key, decision)
        return self._deliver_now(key, decision, resumes)

    def _hand_over(self, key: StepKey, decision: Decision) -> dict[str, Any]:
        if isinstance(decision, Run):
            self._arm_timeout(key, decision)
        return decision_wire(decision)

    def _arm_timeout(self, key: StepKey, decision: Run) -> None:
        deadline = self.port.now() + decision.timeout_ms
        self._deadlines[key] = (deadline, decision.attempt)
        self._attempt_cpu[key] = 0.0
        if self._deadline_at is None or deadline < self._deadline_at:
            self._arm_deadline_timer(deadline)

    def _arm_deadline_timer(self, when: int) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_at = when
        self._deadline_timer = self.port.clock.call_at(when, self._deadlines_due)

    def _deadlines_due(self) -> None:
        """Tell JS of every attempt still in flight past its timeout; wait for the next."""
        self._deadline_timer = self._deadline_at = None
        if self.closed:
            return
        now = self.port.now()
        due = [(key, attempt) for key, (at, attempt) in self._deadlines.items() if at <= now]
        for key, attempt in due:
            del self._deadlines[key]
            in_flight = self.machine.attempts_in_flight().get(
                key
            ) == attempt or self.machine.rollback_in_flight() == (key, attempt)
            if in_flight:
                self.host.post(
                    {"k": "wf.timeout", "g": self.machine.generation, "key": str(key),
                     "attempt": attempt}
                )  # fmt: skip
        if self._deadlines:
            self._arm_deadline_timer(min(at for at, _ in self._deadlines.values()))

    async def _withdrawn(self, settling: Any) -> Any:
        # A store failure broke the cell: it is reloaded from the store, this run is over.
        with contextlib.suppress(StoreUnavailable):
            await settling
        raise RunStopped()

    def _deliver_now(
        self, key: StepKey, decision: Decision, resumes: bool, answer: Later | None = None
    ) -> Later:
        """Commit, then answer with `decision`: from the commit's callback, so that the
        answers of every instance in one group commit go out in one pass, with no task."""
        answer = answer or Later()
        self._delivering += 1

        def committed(error: BaseException | None) -> None:
            if error is not None:
                self._delivering -= 1
                _fail(answer, error)
            elif not self.live:
                self._finish(answer, lambda: self.cell.settle_run(self))
            elif resumes and self.port.settings.replay_every_step and not self.machine.in_flight():
                self._finish(answer, lambda: self.cell.replay(self))
            else:
                self._delivering -= 1
                answer.resolve(self._hand_over(key, decision))

        self.cell.commit_soon(committed)
        return answer

    def _finish(self, answer: Later, settling: Callable[[], Awaitable[Any]]) -> None:
        """The run stops instead of answering: `settling()` runs first, the answer is
        withdrawn after it (or carries its error)."""

        async def finish() -> None:
            try:
                await settling()
            except Exception as error:  # noqa: BLE001 - handed to JS as the answer's error
                _fail(answer, error)
            finally:
                self._delivering -= 1
                answer.withdraw()

        self.port.spawn(finish(), "stopping a run after a step", self.cell.on_task_failure)

    def answers_uncommitted(self, key: StepKey, decision: Decision | None) -> bool:
        """Whether a woken call's answer may reach JS before what the wake-up changed is
        committed: a sleep whose deadline passed, or a retry's next attempt. Neither
        acknowledges anything: a crash before the next commit leaves the row sleeping (or
        retrying) with its deadline past, and the replay resolves the sleep (or runs that
        attempt again: attempt starts are not written) the same way. So the wake-up's rows
        go with the commit of whatever JS does next instead of a commit of their own."""
        if not self.live or self.port.settings.replay_every_step:
            return False
        if key.type == "sleep":
            return isinstance(decision, Resolve)
        return key.type == "do" and isinstance(decision, Run)

    def _suspended(
        self,
        key: StepKey,
        waiter: asyncio.Future[Decision],
        answer: Later,
        error: BaseException | None,
    ) -> None:
        """The suspension is committed: answer once an alarm, an event or a lifecycle
        action settles the call."""
        if error is not None:
            _fail(answer, error)
        elif not answer.settled:
            waiter.add_done_callback(lambda _: self._woken(key, waiter, answer))

    def _woken(self, key: StepKey, waiter: asyncio.Future[Decision], answer: Later) -> None:
        if waiter.cancelled():
            answer.withdraw()  # the run closed
            return
        if answer.settled:
            return
        # a due retry's attempt may be mocked, and its failure retried at once
        decision, acted = self._modify(key, waiter.result())
        if not acted and self.answers_uncommitted(key, decision):
            # What the wake-up changed (the sleep done, the retry's row running) rides
            # with the next commit, usually the step after it: see `answers_uncommitted`.
            answer.resolve(self._hand_over(key, decision))
            return
        if isinstance(decision, Suspend) and self.live:
            again: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
            self.waiters[key] = again
            self._after_turn()  # JS still waits on this call: the run may be idle again
            self.cell.commit_soon(lambda error: self._suspended(key, again, answer, error))
        elif decision is None:
            self._delivering += 1
            self._finish(answer, lambda: self.cell.settle_run(self))
        else:
            self._deliver_now(key, decision, True, answer)

    # -- after each turn ---------------------------------------------------------------------

    def _after_turn(self) -> None:
        if self.rollback_mode:
            # The replay's first turn is over: JS has found the handlers it can.
            if not self.closed and not self._rollback_started:
                self._rollback_started = True
                self.port.spawn(self.drive_rollback(), "rolling back", self.cell.on_task_failure)
            return
        if not self.closed and self._judge_held():
            return
        if self.closed or self._delivering or self.machine.in_flight():
            # Not idle (idle() would do nothing); the attempt's report commits what changed.
            return
        if self.machine.status not in (Status.RUNNING, Status.WAITING):
            # idle() would do nothing either: the run is ending (its end commits) or a
            # pause is settling (the pause commits)
            return
        self.machine.idle(self.port.now())
        self.port.spawn(self._after_idle(), "settling an idle run", self.cell.on_task_failure)

    async def _after_idle(self) -> None:
        try:
            await self.cell.commit()
        except StoreUnavailable:
            return  # the cell broke: it is reloaded from the store
        if self.closed:
            return
        stall_at = self.machine.stall_deadline()
        if stall_at is not None and self._stall_timer is None:
            self._stall_timer = self.port.clock.call_at(stall_at, self._stall_due)
        if self.parked:
            await self.cell.parked_run(self)

    def _stall_due(self) -> None:
        self._stall_timer = None
        if self.closed:
            return
        if self._delivering:
            # An answer is on its way to JS; look again once it has landed.
            self._stall_timer = self.port.clock.call_at(self.port.now() + 10, self._stall_due)
            return
        if self.machine.check_stalled(self.port.now()) is not None:
            self.port.spawn(self.cell.settle_run(self), "failing a stalled run")
            return
        again = self.machine.stall_deadline()
        if again is not None:
            self._stall_timer = self.port.clock.call_at(again, self._stall_due)

    # -- rollback handlers -------------------------------------------------------------------

    async def drive_rollback(self) -> None:
        """Commit what changed, then start the next handler attempt, or end the run once
        the rollback is over. A retry delay is left to the alarm (`Cell.on_alarm`)."""
        if self.closed or not self._rollback_started:
            return
        if self.machine.rollback_in_flight() is not None:
            return  # an attempt is out; its report drives the next step
        decision = self.machine.rollback_next(self.port.now())
        try:
            await self.cell.commit()
        except StoreUnavailable:
            return  # the cell broke: it is reloaded from the store and goes on
        if self.closed:
            return
        if isinstance(decision, Run):
            in_flight = self.machine.rollback_in_flight()
            assert in_flight is not None
            key, attempt = in_flight
            self._arm_timeout(key, decision)
            self.host.post(
                {"k": "wf.rollback", "g": self.machine.generation, "key": str(key),
                 "attempt": attempt, "context": decision.context,
                 "timeout": decision.timeout_ms, "willRetry": decision.will_retry}
            )  # fmt: skip
        elif decision is None:
            await self.cell.settle_run(self)
        elif decision.until is not None and (
            decision.until - self.port.now() > self.port.settings.residency_ms
        ):
            # A long retry delay: hibernate; the alarm starts a new rollback run.
            await self.cell.stop_run()

    def _on_rollback_report(self, m: dict[str, Any]) -> Any:
        if not self._current(m) or not self.rollback_mode:
            return None
        key = StepKey.parse(str(m["key"]))
        attempt = int(m["attempt"])
        self._reported(key)
        now = self.port.now()
        if m.get("missing"):
            self.machine.rollback_missing(key, now)
        elif m.get("ok"):
            self.machine.rollback_attempt_succeeded(key, attempt, now)
        else:
            error = ErrorInfo.from_dict(m.get("error") or {})
            self.machine.rollback_attempt_failed(key, attempt, error, now, **_failure(m))
        return self.drive_rollback()

    # -- CPU ---------------------------------------------------------------------------------

    def _charge_cpu(self, ms: float) -> None:
        """Charge a turn's CPU evenly to the attempts in flight; one past `limits.cpu_ms`
        (counted over all its turns and jobs, microtasks included) condemns the isolate,
        which fails the attempts it was running (they are retried on a fresh isolate)."""
        if self.closed or not self._attempt_cpu:
            return
        share = ms / len(self._attempt_cpu)
        limit = self.host.isolate.limits.cpu_ms
        for key in self._attempt_cpu:
            self._attempt_cpu[key] += share
            if self._attempt_cpu[key] > limit and self.host.isolate.fault is None:
                self.host.isolate.fault = IsolateFault(
                    "CPU time limit exceeded",
                    f"step {key.name!r} used {self._attempt_cpu[key]:.0f} ms of CPU "
                    f"(limits.cpu_ms is {limit})",
                )

    # -- faults ------------------------------------------------------------------------------

    def on_fault(self, fault: IsolateFault) -> None:
        """The isolate hit a limit: fail the attempts it was running, or the instance."""
        if self.closed:
            return
        ref = self.cell.ref
        if fault.lost_write:
            # Another run's result this isolate was told of was never committed (its
            # output gate dropped what waited on it): this run starts over elsewhere.
            self.port.spawn(
                self.cell.replay(self), "moving a run off a condemned isolate",
                self.cell.on_task_failure,
            )  # fmt: skip
            return
        if fault.long_turn:
            # Nothing the stopped turn did left the isolate (its outbox is dropped), so the
            # run starts over by replay on a JS thread, where a long turn holds nothing up.
            log.info(
                "workflow %s/%s: a turn ran long; its runs move to a JS thread",
                ref.workflow,
                ref.id,
            )
            self.port.ran_long(ref)
            self.port.spawn(
                self.cell.replay(self), "moving a run off the event loop", self.cell.on_task_failure
            )
            return
        detail = self.port.settings.lines.rewrite(fault.detail)
        log.error(
            "workflow %s/%s: isolate stopped (%s)\n%s", ref.workflow, ref.id, fault.reason, detail
        )
        error = ErrorInfo("Error", f"Workflow exceeded a limit: {fault.reason}")
        now = self.port.now()
        attempts = self.machine.attempts_in_flight()
        rolling = self.machine.rollback_in_flight()
        if rolling is not None:
            self.machine.rollback_attempt_failed(rolling[0], rolling[1], error, now)
        elif attempts:
            for key, attempt in attempts.items():
                self.machine.attempt_failed(key, attempt, error, now)
        else:
            self.machine.run_failed(error, now)
        self.port.spawn(
            self.cell.replay(self), "recovering from an isolate fault", self.cell.on_task_failure
        )
