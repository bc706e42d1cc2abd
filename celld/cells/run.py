"""One run of an instance's `run()` in an isolate: the step protocol, host side.

The run turns what its isolate reports (`wf.do`, `wf.begin`, `wf.attempt`, `wf.sleep`,
`wf.wait`, `wf.done`) into machine calls, has the cell commit what the machine changed,
and only then answers JS (commit before acknowledge). Calls the machine suspends wait
here until an alarm, an event or a lifecycle action settles them.

A step's answer is a `Later` (celld.isolate.host) settled from the callback of the
commit that holds its result (`Cell.commit_soon`): no task or future per step, and the
answers of every instance in one group commit go to JS in one pass.

A step's successful result may be answered ahead of its commit (the early answer): the
isolate's output gate (celld/isolate/gate.py) is told of the write first, so nothing JS
sends afterwards leaves before it lands. Where the engine's rules say the answer could
only be the value itself (celld/engine/local.py), JS does not even ask: it resolves the
step and reports it as settled, and the host tells the gate of the write at the report's
place (`_settled_locally`).

The run shares its isolate with other runs (celld/isolate/tenant.py): `host` is the run's
`Tenant`, which posts and routes this run's messages only.

The parts of a run with jobs of their own live beside it: the attempts' deadlines and
CPU (celld/cells/attempts.py), the check of a replay under another version of the
Worker (celld/cells/mixed_replay.py) and rollback runs (celld/cells/rollback_run.py).

In test mode an instance may have test modifiers (celld.cells.modifiers): the run
consults them when a step is called and before an attempt is handed to JS, and records
what they cause through the same machine calls a real outcome takes (a mocked result is
a successful attempt, so replay returns it). Such a run never starts attempts
speculatively: every attempt is decided here first.

A run object lives as long as its isolate serves this instance; once closed, every
message it still receives is dropped, so an old run can never touch a newer one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from celld.cells.answers import RunStopped, fail_answer, failure_keywords, never
from celld.cells.attempts import AttemptWatch
from celld.cells.clock import Cancellable
from celld.cells.mixed_replay import MixedVersionReplay, replay_check
from celld.cells.modifiers import Modifiers
from celld.cells.rollback_run import RollbackDriver
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
from celld.engine.local import STEP_RULES_JSON
from celld.isolate.gate import PendingWrite
from celld.isolate.host import Later
from celld.isolate.isolate import IsolateFault, RawJson
from celld.isolate.tenant import Tenant
from celld.project.cron import parse_scheduled_id
from celld.store.base import StoreUnavailable

if TYPE_CHECKING:
    from celld.cells.cell import Cell

log = logging.getLogger("celld.cells")


#: Messages that only tell the engine what the run does next: dispatching them acts on
#: nothing outside celld (what they change is committed before JS hears back).
INWARD_OPS = frozenset({"wf.do", "wf.begin", "wf.attempt", "wf.sleep", "wf.wait", "wf.done"})


class RunOps(Mapping[str, Any]):
    """A run's own host operations by name (`Tenant.ops`), each a method of its CellRun
    bound when looked up. A dict of bound methods per run was eleven objects the cyclic
    collector walks for as long as the run is in flight (its full passes hold the event
    loop: celld/server/collector.py); this is one."""

    __slots__ = ("_run",)
    METHODS = {
        "wf.do": "_on_do",
        "wf.begin": "_on_begin",
        "wf.attempt": "_on_attempt",
        "wf.sleep": "_on_sleep",
        "wf.wait": "_on_wait",
        "wf.timer": "_on_timer",
        "wf.replayed": "_on_replayed",
        "wf.done": "_on_done",
        "wf.fatal": "_on_fatal",
        "wf.rbReport": "_on_rollback_report",
    }

    def __init__(self, run: CellRun) -> None:
        self._run = run

    def get(self, op: str, default: Any = None) -> Any:
        method = self.METHODS.get(op)
        return default if method is None else getattr(self._run, method)

    def __getitem__(self, op: str) -> Any:
        return getattr(self._run, self.METHODS[op])

    def __iter__(self) -> Iterator[str]:
        return iter(self.METHODS)

    def __len__(self) -> int:
        return len(self.METHODS)


class CellRun:
    def __init__(self, cell: Cell, host: Tenant) -> None:
        self.cell = cell
        self.machine = cell.machine
        self.port = cell.port
        self.host = host
        self.closed = False
        self.waiters: dict[StepKey, asyncio.Future[Decision]] = {}
        #: deadlines and CPU of the attempts in flight
        self.attempts = AttemptWatch(cell.machine, host, cell.port.clock, cell.port.now)
        self._stall_timer: Cancellable | None = None
        # Decisions taken but not yet in JS's hands (waiting for their commit): while any
        # exist, JS is not idle even if its last turn ended with nothing to do.
        self._delivering = 0
        #: set (by post_start) when this run only runs rollback handlers
        self.rollback: RollbackDriver | None = None
        #: set while a replay under another version of the Worker is being checked
        self._check: MixedVersionReplay | None = None
        #: a step's result was answered ahead of its commit, which has not landed yet
        self._early = False
        #: run() ended (`wf.done`); `quiet` is set as the run is detached: it ended or
        #: only waited, so what it left in flight cannot wake it to act
        self.ended = False
        self.quiet = False
        host.ops = RunOps(self)  # (the isolate's shared operations serve the rest)
        host.inward_ops = INWARD_OPS
        host.inward_stream = cell
        host.turn_callback = self._after_turn
        host.cpu_callback = self._charge_cpu

    # -- starting and stopping ----------------------------------------------------------

    def post_start(self, start: RunStart) -> None:
        """Hand the run's start (from `Machine.start_run`) to JS (the isolate had its env
        or reset when it was opened: celld/cells/isolates.py)."""
        state = self.machine.state
        # a rollback run only replays to find handlers: nothing new runs, nothing to check
        check = None if start.rollback is not None else replay_check(self, start)
        self._check = None if check is None else MixedVersionReplay(self, check)
        speculate = self.modifiers() is None and self._check is None
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
                "speculate": speculate,
                "rollback": start.rollback,
                "checkVersion": self._check is not None,
                # steps JS may resolve itself (celld/engine/local.py), and the rules, once
                # per isolate
                "local": speculate
                and start.rollback is None
                and not self.port.settings.replay_every_step,
                **self._rules(),
            }
        )
        self.rollback = RollbackDriver(self) if start.rollback is not None else None

    def _rules(self) -> dict[str, Any]:
        """The local step rules, for the first run an isolate starts (JS keeps them)."""
        isolate = self.host.isolate
        if getattr(isolate, "step_rules_sent", False):
            return {}
        isolate.step_rules_sent = True  # type: ignore[attr-defined]
        return {"rules": RawJson(STEP_RULES_JSON)}

    # -- version pinning -------------------------------------------------------------------

    def _on_replayed(self, m: dict[str, Any]) -> None:
        """JS resolved a recorded step from the journal (reported only while checking)."""
        if self._check is not None and self._current(m):
            self._check.replayed(StepKey.parse(str(m["key"])))

    def _held_ask(self, key: StepKey, handler: Any, m: dict[str, Any]) -> Any:
        """While checking: a step the history lacks waits until the replay is quiet."""
        return None if self._check is None else self._check.hold(key, handler, m)

    def _judge_held(self) -> bool:
        """At a quiet point of a checked replay; True if the run was failed."""
        check = self._check
        if check is None:
            return False
        if check.judge():
            return True
        if check.done:
            self._check = None
        return False

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
        self.attempts.close()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        self.host.turn_callback = None
        self.machine.abandon_run()

    @property
    def rollback_mode(self) -> bool:
        """This run only runs rollback handlers."""
        return self.rollback is not None

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
            return never()
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
            self.attempts.arm(key, decision)

    def _on_attempt(self, m: dict[str, Any]) -> Any:
        if not self._current(m):
            pending = m.get("pending")  # (a result JS resolved itself: never written)
            if isinstance(pending, PendingWrite):
                pending.failed(RuntimeError("a stale run resolved a step itself"))
            return never()
        key = self._key("do", m)
        attempt = int(m["attempt"])
        self.attempts.reported(key)
        now = self.port.now()
        decision: Decision | None
        if m.get("local"):
            pending = m.get("pending")
            assert isinstance(pending, PendingWrite)  # told by the host (celld/isolate/host.py)
            value = m["value"]  # (a BinaryValue is a str: kept as it is, with its bytes)
            text = value if isinstance(value, str) else str(value)
            return self._settled_locally(key, attempt, text, now, pending)
        if m.get("unserializable"):
            decision = self.machine.attempt_unserializable(key, attempt, now)
        elif m.get("ok"):
            value = m["value"]  # (a BinaryValue is a str: kept as it is, with its bytes)
            decision = self.machine.attempt_succeeded(
                key, attempt, value if isinstance(value, str) else str(value), now
            )
        else:
            error = ErrorInfo.from_dict(m.get("error") or {})
            decision = self.machine.attempt_failed(key, attempt, error, now, **failure_keywords(m))
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

    def _settled_locally(
        self, key: StepKey, attempt: int, value: str, now: int, pending: PendingWrite
    ) -> None:
        """JS resolved the step with its own value and went on (celld/engine/local.py): the
        engine records the report, and the output gate holds whatever JS sent after it
        until the write lands, as for an early answer (below). Several such steps of one
        turn go in one write. Should the engine not answer with that value (a race the
        rules could not see), JS holds a result that is not the journal's: the gate is
        told of a write that fails at once, which condemns the isolate, and its runs start
        over from what is durable."""
        decision = self.machine.attempt_succeeded(key, attempt, value, now)
        if not isinstance(decision, Resolve) or not self.live or self.host.faulted:
            pending.failed(RuntimeError(f"the engine refused the local result of {key}"))
            return
        self._delivering += 1
        if not self.cell.writes_held:
            self.cell.hold_writes()
            self.host.at_turn_boundary(self.cell.release_writes)
        self.cell.commit_soon(lambda error: self._early_committed(pending, error))

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
        if held:
            self.host.touch()  # (what waits may be another run's: this one hears too)
        pending.landed()  # what waited goes on; the last of it tells `_after_turn`
        if not self.closed and not held and not self.host.turn_pending:
            self._after_turn()

    def _on_sleep(self, m: dict[str, Any]) -> Any:
        if not self._current(m):
            return never()
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
            return never()
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
            return never()
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
        self.ended = True
        now = self.port.now()
        if "error" in m:
            self.machine.run_failed(ErrorInfo.from_dict(m["error"]), now)
        else:
            self.machine.run_succeeded(str(m["output"]), now)
        return self.cell.settle_run(self)

    def _on_fatal(self, m: dict[str, Any]) -> Any:
        """step.do without a callback: thrown into run() (catchable), as wrangler dev does."""
        if not self._current(m):
            return never()
        return decision_wire(Reject(status_error(missing_callback(str(m.get("name"))))))

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
            self.attempts.arm(key, decision)
        return decision_wire(decision)

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
                fail_answer(answer, error)
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
                fail_answer(answer, error)
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
            fail_answer(answer, error)
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
        if self.rollback is not None:
            self.rollback.after_turn()
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

    # -- rollback handlers (celld/cells/rollback_run.py) -------------------------------------

    async def drive_rollback(self) -> None:
        if self.rollback is not None:
            await self.rollback.drive()

    def _on_rollback_report(self, m: dict[str, Any]) -> Any:
        if not self._current(m) or self.rollback is None:
            return None
        return self.rollback.on_report(m)

    # -- CPU ---------------------------------------------------------------------------------

    def _charge_cpu(self, ms: float) -> None:
        """A turn's CPU, charged to the attempts in flight (celld/cells/attempts.py)."""
        if not self.closed:
            self.attempts.charge(ms)

    # -- faults ------------------------------------------------------------------------------

    def on_fault(self, fault: IsolateFault) -> None:
        """The isolate hit a limit: fail the attempts it was running, or the instance."""
        if self.closed:
            return
        ref = self.cell.ref
        shared = fault.tenants > 1
        # (a culprit that is not this run is another run, even one that left already)
        elsewhere = fault.culprit is not None and fault.culprit is not self.host
        if fault.lost_write or elsewhere:
            # Another run's result this isolate was told of was never committed (its
            # output gate dropped what waited on it), or a co-tenant broke the isolate
            # (past its CPU budget, say): this run starts over elsewhere, having lost
            # nothing durable.
            self.port.spawn(
                self.cell.replay(self), "moving a run off a condemned isolate",
                self.cell.on_task_failure,
            )  # fmt: skip
            return
        if shared and fault.culprit is None:
            # The isolate broke (a long turn, a memory limit) serving several runs, and
            # which one did it is unknown: each starts over in an isolate of its own, where
            # a second fault is its own.
            self.port.runs_alone(ref)
            self.port.spawn(
                self.cell.replay(self), "moving a run off a broken shared isolate",
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
