"""The decision core: one :class:`Machine` per workflow instance.

The machine holds the instance's durable records (instance row, step rows, event buffer) and a
little per-run memory (which calls are pending, which attempts are in flight). JS reports what
the workflow does; the machine answers with a :mod:`~celld.engine.decisions` value and records
what must be durable. The caller commits :meth:`Machine.take_changes` **before** it delivers
the decision to JS, so anything acknowledged survives a crash.

Per-run memory is rebuilt by replay: :meth:`Machine.start_run` clears it and hands JS every
finished step; JS asks again for everything else, and the durable rows decide the same way
each time (a deadline stored at first reach is never moved by a replay).

Calls that arrive when no run can be live (instance paused, queued after a restart, final)
are stale: step calls and attempt reports return ``None`` (nothing to deliver), run results
are ignored. The caller also drops messages carrying an old ``generation``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from typing import Any

from . import rollback as rb
from .backoff import retry_delay_ms
from .binary import text_of
from .decisions import (
    Decision,
    Fail,
    JournalEntry,
    JournalText,
    Reject,
    Resolve,
    Run,
    RunStart,
    Suspend,
)
from .durations import DAY_MS, HOUR_MS, SECOND_MS, YEAR_MS, DurationError, parse_duration
from .errors import (
    SLEEP_IN_PAST,
    CannotRestartError,
    CannotSendEventError,
    CannotTerminateError,
    ErrorInfo,
    InvalidEventTypeError,
    InvalidRestartTargetError,
    delay_invalid,
    delay_threw,
    fatal,
    invalid_sleep,
    invalid_step_config,
    invalid_step_name,
    is_non_retryable,
    not_serialisable,
    output_too_large,
    run_output_too_large,
    sleep_too_long,
    stalled,
    status_error,
    step_limit_reached,
)
from .errors import delay_timed_out as delay_timeout_error
from .errors import timed_out as timeout_error
from .lifecycle import ACTIVE, FINAL, LifecycleEvent, Status, transition
from .state import (
    DO_DONE,
    DO_FAILED,
    DO_RETRYING,
    SLEEP_DONE,
    STEP_TYPES,
    TIMED_STATES,
    WAIT_RECEIVED,
    WAIT_TIMED_OUT,
    Changes,
    EventRecord,
    InstanceState,
    StepKey,
    StepRecord,
)
from .stepconfig import (
    DEFAULT_DELAY_MS,
    StepConfig,
    StepConfigError,
    resolve_cached,
    resolve_step_config,
)
from .steps import INITIAL_STATE, StepEvent, step_transition
from .validation import (
    MAX_PAYLOAD_BYTES,
    check_event_buffer,
    step_name_ok,
    too_large,
    validate_event_payload,
    validate_event_type,
    validate_instance_id,
    validate_params,
    validate_retention,
)

DEFAULT_STEP_LIMIT = 10_000
DEFAULT_WAIT_TIMEOUT_MS = 24 * HOUR_MS
MIN_WAIT_TIMEOUT_MS = SECOND_MS
MAX_WAIT_TIMEOUT_MS = 365 * DAY_MS
MAX_SLEEP_MS = YEAR_MS
DEFAULT_STALL_LIMIT_MS = 60_000

_E = LifecycleEvent


def event_json(event: EventRecord) -> str:
    """The value ``waitForEvent`` returns, as JSON text ``{"payload", "type", "timestamp"}``.

    ``payload`` is the payload's serialized text as a JSON *string* (the JS side parses this
    object with ``JSON.parse`` and then deserializes ``payload`` with its own serializer);
    ``timestamp`` is epoch ms, which JS turns into a ``Date``.
    """
    return json.dumps(
        {"payload": text_of(event.payload), "type": event.type, "timestamp": event.timestamp},
        ensure_ascii=False,
        separators=(",", ":"),
    )


class Machine:
    """Replay engine for one instance; see the module docstring."""

    def __init__(
        self,
        state: InstanceState,
        steps: Iterable[StepRecord] = (),
        events: Iterable[EventRecord] = (),
        *,
        step_limit: int = DEFAULT_STEP_LIMIT,
        history_dropped: bool = False,
    ) -> None:
        """``history_dropped``: ``steps`` and ``events`` are only the unfinished rows, the
        rollback phase and the unconsumed events (a store's light load); the finished
        ones stay on disk, as after :meth:`forget_finished`."""
        self._state = state
        self.step_limit = step_limit
        self._steps: dict[StepKey, StepRecord] = {}
        self._configs: dict[StepKey, StepConfig] = {}
        #: keys of rows whose wake_at is a live deadline (for next_wake and resume shifting)
        self._timed: set[StepKey] = set()
        #: the rollback phase row (always in memory; celld.engine.rollback rule 6)
        self._phase: StepRecord | None = None
        #: the rollback attempt handed to the runtime and not reported yet
        self._rb_in_flight: tuple[StepKey, int] | None = None
        for row in sorted(steps, key=lambda r: r.seq):
            if row.type == rb.PHASE:
                self._phase = row
                continue
            self._steps[row.key] = row
            if row.state in TIMED_STATES:
                self._timed.add(row.key)
        self._events: dict[int, EventRecord] = {}
        #: unconsumed events per type, oldest first
        self._buffer: dict[str, deque[EventRecord]] = {}
        for event in sorted(events, key=lambda e: e.seq):
            self._events[event.seq] = event
            if event.consumed_by is None:
                self._buffer.setdefault(event.type, deque()).append(event)
        # dirty tracking
        self._instance_dirty = False
        self._created = False
        self._dirty_steps: dict[StepKey, StepRecord] = {}
        self._deleted_steps: set[StepKey] = set()
        self._dirty_events: dict[int, EventRecord] = {}
        self._deleted_events: set[int] = set()
        self._wiped = False
        # per-run memory
        self._pending: dict[StepKey, None] = {}
        self._in_flight: dict[StepKey, int] = {}
        self._parked: dict[StepKey, tuple[dict[str, Any] | None, bool, dict[str, Any] | None]] = {}
        #: refused speculative starts: the answer their attempt's report gets
        self._refused: dict[StepKey, Decision] = {}
        self._ordinal = 0
        self._idle_since: int | None = None
        #: a quiet replay (a preload): the instance reads `waiting` while JS only asks
        #: again for the calls it is recorded as waiting on (see :meth:`start_run`)
        self._quiet = False
        #: finished rows and consumed events were dropped from memory (they are on disk)
        self._history_dropped = history_dropped

    # ----------------------------------------------------------------------------------------
    # construction and read-only views

    @classmethod
    def create(
        cls,
        workflow: str,
        instance_id: str,
        params: str,
        now: int,
        *,
        retention: dict[str, Any] | None = None,
        step_limit: int = DEFAULT_STEP_LIMIT,
        scheduled: bool = False,
        version: str | None = None,
    ) -> Machine:
        """A new queued instance; raises ``WorkflowError`` for an invalid id, params or
        retention. Duplicate ids are the store's to detect (it sees ``Changes.created``).
        ``scheduled``: the id is a cron schedule's ``"<expression>-<tick>"``, which the
        scheduler makes (user ids cannot have its spaces)."""
        if not scheduled:
            validate_instance_id(instance_id)
        validate_params(params)
        success_ms, error_ms = validate_retention(retention)
        state = InstanceState(
            workflow=workflow,
            id=instance_id,
            params=params,
            created_at=now,
            success_retention_ms=success_ms,
            error_retention_ms=error_ms,
            version=version,
        )
        machine = cls(state, step_limit=step_limit)
        machine._created = True
        machine._instance_dirty = True
        return machine

    @property
    def state(self) -> InstanceState:
        """The instance row (treat as read-only)."""
        return self._state

    @property
    def status(self) -> Status:
        return self._state.status

    @property
    def generation(self) -> int:
        return self._state.generation

    @property
    def idle_since(self) -> int | None:
        return self._idle_since

    def steps(self) -> list[StepRecord]:
        """Step rows in start order (treat as read-only)."""
        self._need_history("steps()")
        return sorted(self._steps.values(), key=lambda r: r.seq)

    def unfinished_steps(self) -> list[StepRecord]:
        """Step rows not finished yet, in start order (always in memory)."""
        return sorted((r for r in self._steps.values() if not r.finished), key=lambda r: r.seq)

    def events(self) -> list[EventRecord]:
        self._need_history("events()")
        return [self._events[seq] for seq in sorted(self._events)]

    def in_flight(self) -> int:
        """Attempts issued (``Run``) and not reported back yet."""
        return len(self._in_flight)

    def attempts_in_flight(self) -> dict[StepKey, int]:
        """Each in-flight attempt by step (a copy), e.g. to fail them when the isolate dies."""
        return dict(self._in_flight)

    def pending(self) -> list[StepKey]:
        """Calls of the current run waiting on a deadline or an event."""
        return list(self._pending)

    def is_final(self) -> bool:
        return self._state.status in FINAL

    def is_expired(self, now: int) -> bool:
        return self._state.expires_at is not None and now >= self._state.expires_at

    def status_view(self) -> dict[str, Any]:
        """``status()``: ``output`` (serialized text) only when complete, ``error`` only when
        errored."""
        status = self._state.status
        view: dict[str, Any] = {"status": status.value}
        if status is Status.ERRORED and self._state.error is not None:
            view["error"] = self._state.error.to_dict()
        if status is Status.COMPLETE:
            view["output"] = self._state.output
        rollback = rb.outcome(self._phase)
        if rollback is not None:
            view["rollback"] = rollback
        return view

    @property
    def rolling_back(self) -> bool:
        """A rollback is running its handlers (celld.engine.rollback)."""
        return self._phase is not None and self._phase.state == rb.ROLLING_BACK

    @property
    def rollback_phase(self) -> StepRecord | None:
        """The rollback phase row, if a rollback began (treat as read-only)."""
        return self._phase

    def rollback_in_flight(self) -> tuple[StepKey, int] | None:
        return self._rb_in_flight

    def next_wake(self) -> int | None:
        """Earliest deadline among unfinished durable steps; ``None`` when paused or final."""
        if self._state.status in FINAL or self._state.status is Status.PAUSED:
            return None
        deadlines = [self._steps[key].wake_at for key in self._timed]
        return min((d for d in deadlines if d is not None), default=None)

    def stall_deadline(self, limit_ms: int = DEFAULT_STALL_LIMIT_MS) -> int | None:
        """When :meth:`check_stalled` would fail the instance, if nothing happens first."""
        if not self._stall_possible():
            return None
        return self._idle_since + limit_ms  # type: ignore[operator]

    def waits_for(self, event_type: str) -> bool:
        """True if an unfinished ``waitForEvent`` of this type is recorded (durably): a
        hibernated instance should be replayed when such an event arrives."""
        return any(
            self._steps[key].type == "waitForEvent" and self._steps[key].event_type == event_type
            for key in self._timed
        )

    # ----------------------------------------------------------------------------------------
    # history in memory

    @property
    def history_dropped(self) -> bool:
        """True when finished steps and consumed events are only on disk: call
        :meth:`restore_history` before :meth:`start_run`, :meth:`restart` from a step,
        :meth:`steps` or :meth:`events`."""
        return self._history_dropped

    def forget_finished(
        self, keys: Iterable[StepKey] | None = None, event_seqs: Iterable[int] | None = None
    ) -> None:
        """Drop finished step rows and consumed events (all, or those of ``keys`` and
        ``event_seqs``: what a commit just wrote) from memory once they are committed (not
        dirty). A live run never needs them again: JS got their outcome; a new run or a
        restart restores them from the store first. This keeps a resident instance's
        memory to its unfinished work, however long its history grows."""
        candidates = list(self._steps) if keys is None else keys
        for key in candidates:
            row = self._steps.get(key)
            if row is not None and row.finished and key not in self._dirty_steps:
                del self._steps[key]
                self._configs.pop(key, None)
                self._history_dropped = True
        seqs = list(self._events) if event_seqs is None else event_seqs
        for seq in seqs:
            event = self._events.get(seq)
            consumed = event is not None and event.consumed_by is not None
            if consumed and seq not in self._dirty_events:
                del self._events[seq]
                self._history_dropped = True

    def restore_history(self, steps: Iterable[StepRecord], events: Iterable[EventRecord]) -> None:
        """Put back finished rows and consumed events read from the store. Rows and events
        in memory win (they may be newer than what was read); finished rows never change
        once committed, so the union is exact."""
        if not self._history_dropped:
            return
        for row in steps:
            if row.type == rb.PHASE:
                continue
            if row.key not in self._steps and row.key not in self._deleted_steps:
                self._steps[row.key] = row
        for event in events:
            if event.seq not in self._events and event.seq not in self._deleted_events:
                self._events[event.seq] = event
        self._history_dropped = False

    def merged_history(
        self, steps: Iterable[StepRecord], events: Iterable[EventRecord]
    ) -> tuple[list[StepRecord], list[EventRecord]]:
        """Every step row and event: those read from the store with the ones in memory
        over them, in order, without restoring anything (a read-only view)."""
        rows = {
            row.key: row
            for row in steps
            if row.key not in self._deleted_steps and row.type != rb.PHASE
        }
        rows.update(self._steps)
        by_seq = {e.seq: e for e in events if e.seq not in self._deleted_events}
        by_seq.update(self._events)
        return (
            sorted(rows.values(), key=lambda r: r.seq),
            [by_seq[seq] for seq in sorted(by_seq)],
        )

    def _need_history(self, what: str) -> None:
        if self._history_dropped:
            raise HistoryDropped(what)

    # ----------------------------------------------------------------------------------------
    # commits

    def take_changes(self) -> Changes:
        """Everything changed since the last call, as copies; resets the dirty sets."""
        changes = Changes(
            self._state.copied() if self._instance_dirty else None,
            self._created,
            [row.copied() for row in self._dirty_steps.values()],
            list(self._deleted_steps) if self._deleted_steps else [],
            [ev.copied() for ev in self._dirty_events.values()] if self._dirty_events else [],
            sorted(self._deleted_events) if self._deleted_events else [],
            self._wiped,
        )
        self._instance_dirty = self._created = self._wiped = False
        if self._dirty_steps:
            self._dirty_steps = {}
        if self._deleted_steps:
            self._deleted_steps = set()
        if self._dirty_events:
            self._dirty_events = {}
        if self._deleted_events:
            self._deleted_events = set()
        return changes

    def _touch(self) -> None:
        self._instance_dirty = True

    def _touch_step(self, row: StepRecord) -> None:
        self._dirty_steps[row.key] = row
        self._deleted_steps.discard(row.key)
        if row.state in TIMED_STATES:
            self._timed.add(row.key)
        else:
            self._timed.discard(row.key)

    def _touch_event(self, event: EventRecord) -> None:
        self._dirty_events[event.seq] = event
        self._deleted_events.discard(event.seq)

    # ----------------------------------------------------------------------------------------
    # status helpers

    def _go(self, event: LifecycleEvent) -> None:
        self._state.status = transition(self._state.status, event)
        self._touch()

    def abandon_run(self) -> None:
        """The run's isolate is gone (hibernated, evicted, stopped): forget its pending calls
        and in-flight attempts so nothing is settled for a run no one listens to. Durable
        rows are untouched; the next run replays from them."""
        self._clear_run()

    def _clear_run(self) -> None:
        self._rb_in_flight = None
        self._pending.clear()
        self._in_flight.clear()
        self._parked.clear()
        self._refused.clear()
        self._ordinal = 0
        self._idle_since = None
        self._quiet = False

    def _finish(self, event: LifecycleEvent, now: int, retention_ms: int) -> None:
        self._go(event)
        self._state.finished_at = now
        self._state.expires_at = now + retention_ms
        self._clear_run()

    def _fail(self, error: ErrorInfo, now: int) -> Fail:
        """Fatal: the instance is errored with ``error`` as is (engine-made errors keep their
        name, as wrangler dev's status shows ``WorkflowFatalError``), once its rollback
        handlers ran if it has any."""
        if self._begin_rollback(rb.REASON_FAIL, error, False, now):
            return Fail(error)
        self._state.error = error
        self._state.output = None
        self._finish(_E.FAIL, now, self._state.error_retention_ms)
        return Fail(error)

    def _active(self) -> bool:
        """A forward run may be live (not while a rollback runs: its calls are stale)."""
        return self._state.status in ACTIVE and not self.rolling_back

    def _pausing(self) -> bool:
        return self._state.status is Status.WAITING_FOR_PAUSE

    def _js_active(self, key: StepKey | None = None, now: int = 0) -> None:
        """JS did something: the stall clock stops and a waiting instance runs again.
        In a quiet replay, a call of `key` that is recorded as still waiting (a sleep or
        retry delay not due, a wait with no event for it) is only the replay catching
        up: the instance goes on waiting. Anything else ends the quiet replay."""
        self._idle_since = None
        if self._quiet:
            if key is not None and self._still_waiting(key, now):
                return
            self._quiet = False
        if self._state.status is Status.WAITING:
            self._go(_E.WAKE)

    def _still_waiting(self, key: StepKey, now: int) -> bool:
        row = self._steps.get(key)
        if row is None or key not in self._timed or row.wake_at is None or row.wake_at <= now:
            return False
        return row.type != "waitForEvent" or not self._buffer.get(row.event_type or "")

    def _settle_pause_if_idle(self, now: int) -> None:
        if self._pausing() and not self._in_flight:
            self._go(_E.PAUSE_SETTLED)
            self._state.paused_at = now
            self._clear_run()

    def _stall_possible(self) -> bool:
        return (
            not self.rolling_back
            and self._state.status is Status.RUNNING
            and self._idle_since is not None
            and not self._in_flight
            and not self._pending
        )

    def recover(self, now: int) -> bool:
        """Call once after loading an instance from the store (a new process or a crash).

        Attempts in flight when the process died are lost, so a pause that was waiting for
        them settles now. Returns True when a run must be started (queued, running, waiting).
        """
        self._settle_pause_if_idle(now)
        return self._state.status in (Status.QUEUED, Status.RUNNING, Status.WAITING)

    # ----------------------------------------------------------------------------------------
    # runs

    @property
    def journal_on_disk_suffices(self) -> bool:
        """:meth:`start_run` may take the finished steps dropped from memory as journal
        text read from the store (``recorded``) instead of restored rows: nothing
        committed is about to be deleted (a restart from a step) and no rollback plan,
        which needs the forward steps' rows, is to be made."""
        return not (self._deleted_steps or self._wiped or self.rolling_back)

    def start_run(
        self, now: int, recorded: JournalText | None = None, *, quiet: bool = False
    ) -> RunStart:
        """A run (re)starts from the top: queued/running/waiting -> running.

        ``quiet``: a waiting instance is brought in ahead of its deadline (a preload). Its
        status stays ``waiting`` (nothing changes, nothing is to be committed) while the
        replay only asks again for the calls it waits on; it turns ``running`` as soon
        as anything else happens (a deadline already passed, an attempt, a new step).

        Returns every finished step. Sleeps whose end has passed are marked done, and waits
        whose deadline has passed take a buffered event sent before the deadline or time out,
        durably, so the journal and the rows agree.

        With history dropped from memory, either restore it first or pass ``recorded``:
        the store's journal text of every committed finished step (read while nothing
        is committed, see :attr:`journal_on_disk_suffices`); the finished rows in memory
        are added to them.
        """
        if recorded is None or not self.journal_on_disk_suffices:
            self._need_history("start_run()")
        quiet = quiet and self._state.status is Status.WAITING and not self.rolling_back
        if not quiet:
            self._go(_E.START)
        if self._state.started_at is None:
            self._state.started_at = now
        self._clear_run()
        journal: dict[str, JournalEntry] = {}
        for key, row in self._steps.items():
            if row.type not in STEP_TYPES:
                continue
            due = row.wake_at is not None and row.wake_at <= now
            if due and row.type != "do" and row.state in TIMED_STATES:
                if quiet:  # a deadline passed meanwhile: this is a real run after all
                    quiet = False
                    self._go(_E.WAKE)
                self._settle_due(row, now)
            entry = self.journal_entry(row)
            if entry is not None:
                journal[str(key)] = entry
        self._quiet = quiet
        return RunStart(
            self._state.generation,
            journal,
            self.step_limit,
            self._rollback_plan(),
            recorded if self._history_dropped and recorded else None,
        )

    def _rollback_plan(self) -> dict[str, Any] | None:
        """For a rollback run: the trigger error and each eligible handler, in order."""
        if not self.rolling_back:
            return None
        assert self._phase is not None and self._phase.error is not None
        steps = []
        for row in rb.eligible(self._steps.values()):
            forward = self._steps.get(rb.forward_key(row.key))
            config = self._config(forward) if forward is not None else StepConfig()
            steps.append(rb.plan_entry(row, forward, config))
        return {"error": self._phase.error.to_dict(), "steps": steps}

    @staticmethod
    def journal_entry(row: StepRecord) -> JournalEntry | None:
        """A finished step as the journal gives it to JS; None for an unfinished one."""
        if row.state in (DO_DONE, WAIT_RECEIVED):  # DO_DONE == SLEEP_DONE
            return JournalEntry("value", None if row.type == "sleep" else row.value)
        if row.state in (DO_FAILED, WAIT_TIMED_OUT):
            return JournalEntry("error", row.error)
        return None

    def run_succeeded(self, output: str, now: int) -> None:
        """``run()`` returned ``output``: complete. Ignored when no run is live (stale)."""
        if not self._active():
            return
        if too_large(output):  # limited as step results are
            size = len(output.encode("utf-8", "surrogatepass"))
            self._fail(run_output_too_large(size, MAX_PAYLOAD_BYTES), now)
            return
        self._state.output = output
        self._state.error = None
        self._finish(_E.COMPLETE, now, self._state.success_retention_ms)

    def run_failed(self, error: ErrorInfo, now: int) -> None:
        """``run()`` threw ``error``: errored, in the ``status().error`` shape. Ignored when no
        run is live (stale)."""
        if not self._active():
            return
        if self._begin_rollback(rb.REASON_FAIL, error, True, now):
            return
        self._state.error = status_error(error)
        self._state.output = None
        self._finish(_E.FAIL, now, self._state.error_retention_ms)

    def idle(self, now: int) -> None:
        """JS went quiet. With only waits pending the instance is ``waiting``; with nothing
        pending at all the stall clock starts (see :meth:`check_stalled`)."""
        if self._state.status not in (Status.RUNNING, Status.WAITING) or self._in_flight:
            return
        if self._pending:
            if self._state.status is Status.RUNNING:
                self._go(_E.SUSPEND)
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now

    def fail(self, error: ErrorInfo, now: int) -> Fail | None:
        """Fail the instance with an engine-made fatal ``error`` (kept as is, not folded), e.g.
        ``errors.missing_callback(name)`` reported by JS. ``None`` when no run is live.
        During a rollback (its runtime could not start, say) the rollback fails with
        ``error`` and the instance ends as the rollback's reason says."""
        if self.rolling_back:
            self._end_rollback(error, now)
            return Fail(error)
        if not self._active():
            return None
        return self._fail(error, now)

    def pin_version(self, version: str | None) -> None:
        """Record the Worker version the instance's history now comes from (a full restart
        starts a new history)."""
        if self._state.version != version:
            self._state.version = version
            self._touch()

    def fail_fatal(self, error: ErrorInfo, now: int) -> Fail | None:
        """Fail the instance with an engine-made error found outside the machine (a replay
        under another version that would mix histories, :mod:`.versions`)."""
        if not self._active():
            return None
        return self._fail(error, now)

    def check_stalled(self, now: int, limit_ms: int = DEFAULT_STALL_LIMIT_MS) -> Fail | None:
        """Fail an instance whose ``run()`` has been pending for ``limit_ms`` with no step
        running or waiting (it awaits work outside any step, which cannot survive replay)."""
        if self._stall_possible() and now - self._idle_since >= limit_ms:  # type: ignore[operator]
            return self._fail(stalled(limit_ms), now)
        return None

    # ----------------------------------------------------------------------------------------
    # step.do

    def step_do(
        self,
        name: str,
        count: int,
        ordinal: int | None,
        raw_config: dict[str, Any] | None,
        now: int,
        *,
        dynamic_delay: bool = False,
        rollback: dict[str, Any] | None = None,
    ) -> Decision | None:
        """``step.do(name, config, cb)``, the ``count``-th of that name in this run and the
        ``ordinal``-th ``step.do`` overall (``None``: the machine counts the calls it sees).
        ``rollback``: the call carries a rollback handler, ``{"config": rollbackConfig or
        None, "dynamic": its delay is a function}`` (registered at first execution)."""
        if not self._active():
            return None
        key = StepKey("do", name, count)
        self._js_active(key, now)
        self._ordinal += 1
        if (ordinal if ordinal is not None else self._ordinal) > self.step_limit:
            return _thrown(step_limit_reached(self.step_limit))
        if not step_name_ok(name):
            return _thrown(invalid_step_name(name))
        return self._decide_do(key, raw_config, dynamic_delay, now, rollback)

    def step_begin(
        self,
        name: str,
        count: int,
        ordinal: int | None,
        raw_config: dict[str, Any] | None,
        now: int,
        *,
        dynamic_delay: bool = False,
        rollback: dict[str, Any] | None = None,
    ) -> Decision | None:
        """JS started attempt 1 of ``step.do`` on its own, without asking (a *speculative
        start*: it had seen the step's config accepted before, so it knew the answer).

        The machine decides exactly as for :meth:`step_do`. When that decision is "run attempt
        1" the start is **accepted**: the attempt is in flight and its report is handled as
        usual; the caller arms its timeout from the returned :class:`Run`. Any other decision
        means the start is **refused**; it is remembered and becomes the answer to the
        attempt's report, whose outcome is not recorded.

        The runtime only starts speculatively while it may (the caller tells it to hold, at a
        turn boundary, before a pause takes effect; see ``celld/engine/DECISIONS.md``), so a
        refusal answers a start that broke that protocol: while pausing, no attempt starts.
        ``None``: stale (no run is live).
        """
        key = StepKey("do", name, count)
        decision = self.step_do(
            name, count, ordinal, raw_config, now, dynamic_delay=dynamic_delay, rollback=rollback
        )
        if decision is not None and not (isinstance(decision, Run) and decision.attempt == 1):
            self._refused[key] = decision
        return decision

    def _refusal(self, key: StepKey) -> Decision | None:
        """The standing answer to the report of a refused speculative start, if any."""
        return self._refused.pop(key, None) if self._refused else None

    def _decide_do(
        self,
        key: StepKey,
        raw_config: dict[str, Any] | None,
        dynamic_delay: bool,
        now: int,
        rollback: dict[str, Any] | None = None,
    ) -> Decision:
        row = self._steps.get(key)
        if row is not None:
            if row.state == DO_DONE:
                return Resolve(row.value)
            if row.state == DO_FAILED:
                return Reject(row.error)  # type: ignore[arg-type]
            if row.state == DO_RETRYING:
                assert row.wake_at is not None
                if row.wake_at <= now and not self._pausing():
                    return self._issue(row, row.attempts + 1)
                self._pending[key] = None
                return Suspend(row.wake_at)
            # DO_RUNNING: left by a crash or an earlier run; same attempt number again
        if self._pausing():
            # no new attempt starts while a pause is pending; wake() answers if it is cancelled
            self._parked[key] = (raw_config, dynamic_delay, rollback)
            return Suspend(None)
        if row is None:
            try:
                config, config_json = resolve_cached(key.name, raw_config, dynamic_delay)
            except StepConfigError:
                return _thrown(invalid_step_config(key.name))
            rollback_config = None
            if rollback is not None:
                try:
                    dynamic = bool(rollback.get("dynamic"))
                    rollback_config = resolve_step_config(
                        key.name, rollback.get("config"), dynamic_delay=dynamic
                    )
                except StepConfigError:
                    return _thrown(rb.invalid_rollback_config(key.name))
            row = StepRecord(
                type="do",
                name=key.name,
                count=key.count,
                seq=self._next_seq(),
                state=INITIAL_STATE["do"],
                config=config_json,
                started_at=now,
            )
            self._steps[key] = row
            self._configs[key] = config
            self._touch_step(row)
            if rollback_config is not None:  # rollback rule 1
                registered = rb.registration(key, row.seq, rollback_config, now)
                self._steps[registered.key] = registered
                self._configs[registered.key] = rollback_config
                self._touch_step(registered)
        return self._issue(row, row.attempts + 1)

    def _next_seq(self) -> int:
        seq = self._state.next_seq
        self._state.next_seq = seq + 1
        self._touch()
        return seq

    def _config(self, row: StepRecord) -> StepConfig:
        config = self._configs.get(row.key)
        if config is None:
            config = StepConfig.from_json(row.config) if row.config else StepConfig()
            self._configs[row.key] = config
        return config

    def _issue(self, row: StepRecord, attempt: int) -> Run:
        """Start ``attempt``. Not written: attempt starts are not durable (a crash reruns the
        same attempt number: steps are at least once)."""
        config = self._config(row)
        row.state = step_transition("do", row.state, StepEvent.ATTEMPT)
        row.wake_at = None
        self._timed.discard(row.key)
        self._pending.pop(row.key, None)
        self._in_flight[row.key] = attempt
        context = {
            "step": {"name": row.name, "count": row.count},
            "attempt": attempt,
            "config": config.to_context(),
        }
        return Run(attempt, context, config.timeout_ms, attempt <= config.limit)

    def _reported(self, key: StepKey, attempt: int) -> StepRecord | None:
        """The row for a live report of ``attempt``, or ``None`` if the report is stale."""
        if self._in_flight.get(key) != attempt:
            return None
        del self._in_flight[key]
        return self._steps.get(key)

    def attempt_succeeded(
        self, key: StepKey, attempt: int, value: str, now: int
    ) -> Decision | None:
        """The callback returned ``value``. An oversized value is a failed attempt (retried
        like any other). ``None`` for a stale report."""
        refused = self._refusal(key)
        if refused is not None:
            return refused
        if self._in_flight.get(key) != attempt:
            return None
        if too_large(value):
            return self.attempt_failed(key, attempt, output_too_large(key.name, key.count), now)
        row = self._reported(key, attempt)
        if row is None:
            return None
        row.state = step_transition("do", row.state, StepEvent.SUCCEED)
        row.value = value
        row.error = None
        row.finished_at = now
        self._touch_step(row)
        return self._after_report(Resolve(value), now)

    def attempt_failed(
        self,
        key: StepKey,
        attempt: int,
        error: ErrorInfo | None,
        now: int,
        *,
        nonretryable: bool = False,
        timed_out: bool = False,
        delay_ms: int | float | str | None = None,
        delay_error: ErrorInfo | None = None,
        delay_timed_out: bool = False,
    ) -> Decision | None:
        """The callback threw ``error`` (or timed out: ``timed_out=True``, error ignored).

        ``delay_ms`` is what a dynamic delay function returned (a number of ms or a duration
        string; it goes through the configured backoff, as in wrangler dev); ``delay_error``
        / ``delay_timed_out`` say the function threw or did not answer within 5 s, which fails
        the step without further retries. ``None`` for a stale report.
        """
        refused = self._refusal(key)
        if refused is not None:
            return refused
        row = self._reported(key, attempt)
        if row is None:
            return None
        row.attempts = max(row.attempts, attempt)
        error, delay = _retry(
            self._config(row), key, attempt, error, nonretryable=nonretryable,
            timed_out=timed_out, delay_ms=delay_ms, delay_error=delay_error,
            delay_timed_out=delay_timed_out,
        )  # fmt: skip
        if delay is None:
            return self._after_report(self._fail_step(row, error, now), now)
        row.state = step_transition("do", row.state, StepEvent.RETRY)
        row.wake_at = now + delay
        row.error = error
        self._touch_step(row)
        if delay == 0 and not self._pausing():
            return self._after_report(self._issue(row, attempt + 1), now)
        self._pending[key] = None
        return self._after_report(Suspend(row.wake_at), now)

    def attempt_unserializable(self, key: StepKey, attempt: int, now: int) -> Decision | None:
        """The callback returned something the serializer refused: fatal, no retry (or the
        standing answer of a refused speculative start)."""
        refused = self._refusal(key)
        if refused is not None:
            return refused
        row = self._reported(key, attempt)
        if row is None:
            return None
        error = not_serialisable(key.name)
        self._fail_step(row, error, now)
        return self._fail(error, now)

    def _fail_step(self, row: StepRecord, error: ErrorInfo, now: int) -> Reject:
        row.state = step_transition("do", row.state, StepEvent.GIVE_UP)
        row.error = error
        row.wake_at = None
        row.finished_at = now
        self._pending.pop(row.key, None)
        self._touch_step(row)
        return Reject(error)

    def _after_report(self, decision: Decision, now: int) -> Decision:
        if self._pausing():
            self._settle_pause_if_idle(now)
        else:
            self._js_active()
        return decision

    # ----------------------------------------------------------------------------------------
    # step.sleep / step.sleepUntil

    def step_sleep(
        self,
        name: str,
        count: int,
        now: int,
        *,
        duration_ms: int | float | str | None = None,
        until_ms: int | float | None = None,
    ) -> Decision | None:
        """``step.sleep(name, duration)`` (``duration_ms``: ms or a Duration string) or
        ``step.sleepUntil(name, t)`` (``until_ms``: epoch ms). The end is stored at first
        reach; a sleep is keyed by name and count only, so a changed duration on replay does
        not make it a new sleep."""
        if not self._active():
            return None
        key = StepKey("sleep", name, count)
        self._js_active(key, now)
        if not step_name_ok(name):
            return _thrown(invalid_step_name(name))
        row = self._steps.get(key)
        if row is None:
            if until_ms is not None:
                if not _is_finite_number(until_ms):
                    return _thrown(invalid_sleep(name, f"invalid time {until_ms!r}"))
                target = int(until_ms)
                if target < now:
                    return Reject(SLEEP_IN_PAST)
            else:
                if duration_ms is None:
                    return _thrown(invalid_sleep(name, "a duration is required"))
                try:
                    target = now + parse_duration(duration_ms)
                except DurationError as exc:
                    return _thrown(invalid_sleep(name, str(exc)))
            if target - now > MAX_SLEEP_MS:
                return _thrown(sleep_too_long(name, target - now, MAX_SLEEP_MS))
            row = StepRecord(
                type="sleep",
                name=name,
                count=count,
                seq=self._next_seq(),
                state=INITIAL_STATE["sleep"],
                wake_at=target,
                started_at=now,
            )
            self._steps[key] = row
            self._touch_step(row)
        if row.state == SLEEP_DONE:
            return Resolve(None)
        assert row.wake_at is not None
        if row.wake_at <= now and not self._pausing():
            return self._settle_due(row, now)
        self._pending[key] = None
        return Suspend(row.wake_at)

    # ----------------------------------------------------------------------------------------
    # step.waitForEvent

    def step_wait(
        self,
        name: str,
        count: int,
        event_type: str,
        timeout_ms: int | float | str | None,
        now: int,
    ) -> Decision | None:
        """``step.waitForEvent(name, {type, timeout})``: the oldest buffered event of the type,
        else pending until an event or the deadline (stored at first reach)."""
        if not self._active():
            return None
        key = StepKey("waitForEvent", name, count)
        self._js_active(key, now)
        if not step_name_ok(name):
            return _thrown(invalid_step_name(name))
        row = self._steps.get(key)
        if row is None:
            try:
                validate_event_type(event_type)
            except InvalidEventTypeError as exc:
                return _thrown(fatal(exc.message))
            try:
                timeout = parse_duration(
                    DEFAULT_WAIT_TIMEOUT_MS if timeout_ms is None else timeout_ms
                )
            except DurationError:
                return _thrown(invalid_step_config(name))
            if not MIN_WAIT_TIMEOUT_MS <= timeout <= MAX_WAIT_TIMEOUT_MS:
                return _thrown(invalid_step_config(name))
            row = StepRecord(
                type="waitForEvent",
                name=name,
                count=count,
                seq=self._next_seq(),
                state=INITIAL_STATE["waitForEvent"],
                config=json.dumps({"timeout_ms": timeout}),
                wake_at=now + timeout,
                event_type=event_type,
                started_at=now,
            )
            self._steps[key] = row
            self._touch_step(row)
        if row.state == WAIT_RECEIVED:
            return Resolve(row.value)
        if row.state == WAIT_TIMED_OUT:
            return Reject(row.error)  # type: ignore[arg-type]
        if not self._pausing():
            decision = self._settle_wait(row, now)
            if decision is not None:
                return decision
        self._pending[key] = None
        return Suspend(row.wake_at, row.event_type)

    def _settle_wait(self, row: StepRecord, now: int) -> Decision | None:
        """Consume a buffered event sent before the deadline, else time out if the deadline
        has been reached; ``None`` if the wait goes on. (At ``now == deadline`` the wait has
        timed out, for events as for ``wake``.)"""
        assert row.wake_at is not None and row.event_type is not None
        queue = self._buffer.get(row.event_type)
        if queue and queue[0].timestamp < row.wake_at:
            return self._consume(row, queue, now)
        if row.wake_at <= now:
            row.state = step_transition(row.type, row.state, StepEvent.TIME_OUT)
            row.error = timeout_error(_wait_timeout_ms(row))
            row.finished_at = now
            self._pending.pop(row.key, None)
            self._touch_step(row)
            return Reject(row.error)
        return None

    def _consume(self, row: StepRecord, queue: deque[EventRecord], now: int) -> Resolve:
        event = queue.popleft()
        if not queue:
            del self._buffer[event.type]
        event.consumed_by = row.key
        self._touch_event(event)
        row.state = step_transition(row.type, row.state, StepEvent.RECEIVE)
        row.value = event_json(event)
        row.finished_at = now
        self._pending.pop(row.key, None)
        self._touch_step(row)
        return Resolve(row.value)

    def _settle_due(self, row: StepRecord, now: int) -> Decision:
        """Finish a sleep or wait whose deadline has passed (wait: event or timeout)."""
        if row.type == "sleep":
            row.state = step_transition(row.type, row.state, StepEvent.WAKE)
            row.finished_at = now
            self._pending.pop(row.key, None)
            self._touch_step(row)
            return Resolve(None)
        decision = self._settle_wait(row, now)
        assert decision is not None
        return decision

    # ----------------------------------------------------------------------------------------
    # time and events from outside

    def wake(self, now: int) -> list[tuple[StepKey, Decision]]:
        """Decisions for this run's pending calls that can now proceed: due sleeps resolve,
        due retries run their next attempt, due waits take an event or time out (durably);
        waits with a buffered event take it; calls parked during a cancelled pause are
        answered. Nothing while paused or pausing, or while a rollback runs (the runtime asks
        :meth:`rollback_next` instead)."""
        if self._state.status not in (Status.RUNNING, Status.WAITING) or self.rolling_back:
            return []
        out: list[tuple[StepKey, Decision]] = []
        due = sorted(
            (self._steps[key] for key in self._pending if self._steps[key].wake_at is not None),
            key=lambda r: (r.wake_at, r.seq),
        )
        for row in due:
            if row.wake_at > now:  # type: ignore[operator]
                if row.type == "waitForEvent":
                    decision = self._settle_wait(row, now)
                    if decision is not None:
                        out.append((row.key, decision))
                continue
            if row.type == "do":
                out.append((row.key, self._issue(row, row.attempts + 1)))
            else:
                out.append((row.key, self._settle_due(row, now)))
        parked, self._parked = self._parked, {}
        for key, (raw_config, dynamic_delay, rollback) in parked.items():
            out.append((key, self._decide_do(key, raw_config, dynamic_delay, now, rollback)))
            if self._state.status is Status.ERRORED:
                break
        if out and self._state.status in ACTIVE:
            self._js_active()
        return out

    def cut_short(self, key: StepKey, now: int) -> Decision | None:
        """End a pending deadline of this run now, as if it had come (test modifiers:
        disabled sleeps and retry delays, forced event timeouts). A sleep wakes, a pending
        retry starts its next attempt, a wait times out with the error its own timeout
        gives, whatever events are buffered. The deadline moves to ``now`` (durably), so
        while a pause is pending (``None`` then) it is due as soon as the run resumes.
        ``None`` too when ``key`` is not pending."""
        if key not in self._pending or not self._active():
            return None
        row = self._steps[key]
        if row.wake_at is not None and row.wake_at > now:
            row.wake_at = now
            self._touch_step(row)
        if self._pausing():
            return None
        decision: Decision
        if row.type == "do":
            decision = self._issue(row, row.attempts + 1)
        elif row.type == "sleep":
            decision = self._settle_due(row, now)
        else:
            row.state = step_transition(row.type, row.state, StepEvent.TIME_OUT)
            row.error = timeout_error(_wait_timeout_ms(row))
            row.finished_at = now
            self._pending.pop(key, None)
            self._touch_step(row)
            decision = Reject(row.error)
        self._js_active()
        return decision

    def send_event(
        self, event_type: str, payload: str | None, now: int
    ) -> list[tuple[StepKey, Decision]]:
        """``instance.sendEvent({type, payload})``. Validated (``WorkflowError``), stored durably
        (kept while paused or queued), and handed to the oldest pending wait of that type in
        this run, if any. A finished instance (complete, errored, terminated) refuses it with
        ``CannotSendEventError``, as production documents."""
        validate_event_type(event_type)
        validate_event_payload(payload or "")
        if self._state.status in FINAL:
            raise CannotSendEventError(self._state.status.value)
        if not any(
            key.type == "waitForEvent" and self._steps[key].event_type == event_type
            for key in self._pending
        ):
            check_event_buffer(sum(len(queue) for queue in self._buffer.values()))
        seq = self._state.next_event_seq
        self._state.next_event_seq = seq + 1
        self._touch()
        event = EventRecord(seq=seq, type=event_type, payload=payload or "", timestamp=now)
        self._events[seq] = event
        self._buffer.setdefault(event_type, deque()).append(event)
        self._touch_event(event)
        if self._state.status not in (Status.RUNNING, Status.WAITING):
            return []
        waits = sorted(
            (
                self._steps[key]
                for key in self._pending
                if key.type == "waitForEvent" and self._steps[key].event_type == event_type
            ),
            key=lambda r: r.seq,
        )
        for row in waits:
            if row.wake_at is not None and row.wake_at > now:
                decision = self._consume(row, self._buffer[event_type], now)
                self._js_active()
                return [(row.key, decision)]
        return []

    # ----------------------------------------------------------------------------------------
    # operator actions

    def pause(self, now: int) -> None:
        """queued/running/waiting: ``waitingForPause`` while attempts are in flight, then
        ``paused``; pending calls are dropped (the run replays after resume). A no-op when
        paused, pausing or final (as wrangler dev), or while a rollback runs."""
        if self.rolling_back:
            return
        if self._state.status not in (Status.QUEUED, Status.RUNNING, Status.WAITING):
            return
        self._go(_E.PAUSE_REQUESTED)
        self._idle_since = None
        self._settle_pause_if_idle(now)

    def resume(self, now: int) -> bool:
        """paused -> queued with every live deadline shifted by the time spent paused; returns
        True: a new run must start. waitingForPause -> running (the pause is cancelled; call
        :meth:`wake` to answer calls parked meanwhile); returns False. Otherwise a no-op."""
        if self.rolling_back:
            return False
        status = self._state.status
        if status is Status.PAUSED:
            shift = now - (self._state.paused_at if self._state.paused_at is not None else now)
            if shift:
                for key in self._timed:
                    row = self._steps[key]
                    if row.wake_at is not None:
                        row.wake_at += shift
                        self._touch_step(row)
            self._state.paused_at = None
            self._go(_E.RESUME)
            self._clear_run()
            return True
        if status is Status.WAITING_FOR_PAUSE:
            self._go(_E.RESUME)
            return False
        return False

    def terminate(self, now: int, *, rollback: bool = False) -> None:
        """Stop for good; raises ``CannotTerminateError`` on a finished instance. With
        ``rollback`` the registered rollback handlers run first (the instance reads
        ``running`` until they are done; see :mod:`celld.engine.rollback`). During a
        rollback, it stops the rollback (rule 7)."""
        if self._state.status in FINAL:
            raise CannotTerminateError()
        if self.rolling_back:
            assert self._phase is not None
            self._end_rollback(rb.STOPPED, now, reason=rb.REASON_TERMINATE)
            return
        if rollback and self._begin_rollback(rb.REASON_TERMINATE, rb.TERMINATE_TRIGGER, False, now):
            return
        self._state.paused_at = None
        self._finish(_E.TERMINATE, now, self._state.error_retention_ms)

    # ----------------------------------------------------------------------------------------
    # rollback handlers (celld.engine.rollback)

    def _begin_rollback(self, reason: str, trigger: ErrorInfo, fold: bool, now: int) -> bool:
        """Rule 3: begin a rollback if a handler is eligible; False if none is."""
        if self.rolling_back or not rb.eligible(self._steps.values()):
            return False
        self._phase = rb.phase_row(reason, trigger, fold, now)
        self._touch_step(self._phase)
        self._state.paused_at = None
        self._go(_E.ROLLBACK)
        self._clear_run()
        return True

    def rollback_next(self, now: int) -> Run | Suspend | None:
        """What the rollback does next: run an attempt of the newest eligible handler
        (``Run``; its row's key is :meth:`rollback_in_flight`), wait for its retry delay
        (``Suspend``), or nothing: the rollback is over (or none runs) and the instance has
        ended as its reason says."""
        if not self.rolling_back:
            return None
        if self._rb_in_flight is not None:
            key, attempt = self._rb_in_flight
            return self._rollback_run(self._steps[key], attempt)
        rows = rb.eligible(self._steps.values())
        if not rows:
            self._end_rollback(None, now)
            return None
        row = rows[0]
        if row.state == rb.RB_RETRYING and row.wake_at is not None and row.wake_at > now:
            return Suspend(row.wake_at)
        if row.wake_at is not None:
            self._touch()  # next_wake moves
        row.state = step_transition(row.type, row.state, StepEvent.ATTEMPT)
        row.wake_at = None
        self._timed.discard(row.key)
        attempt = row.attempts + 1
        self._rb_in_flight = (row.key, attempt)
        return self._rollback_run(row, attempt)

    def _rollback_run(self, row: StepRecord, attempt: int) -> Run:
        config = self._config(row)
        context = {
            "step": {"name": row.name, "count": row.count},
            "attempt": attempt,
            "config": config.to_context(),
        }
        return Run(attempt, context, config.timeout_ms, attempt <= config.limit)

    def _rollback_reported(self, key: StepKey, attempt: int) -> StepRecord | None:
        if not self.rolling_back or self._rb_in_flight != (key, attempt):
            return None
        self._rb_in_flight = None
        return self._steps.get(key)

    def rollback_attempt_succeeded(self, key: StepKey, attempt: int, now: int) -> bool:
        """The handler of rollback row ``key`` returned: the row is ``done`` (it never runs
        again once committed). False for a stale report."""
        row = self._rollback_reported(key, attempt)
        if row is None:
            return False
        row.state = step_transition(row.type, row.state, StepEvent.SUCCEED)
        row.error = None
        row.finished_at = now
        self._touch_step(row)
        return True

    def rollback_attempt_failed(
        self, key: StepKey, attempt: int, error: ErrorInfo | None, now: int, **how: Any
    ) -> bool:
        """The handler threw (or timed out): retried as its ``rollbackConfig`` says, or the
        row fails and so does the rollback (rule 5). ``how``: the keywords of
        :meth:`attempt_failed` (timed out, non-retryable, dynamic delay). False for a stale
        report."""
        row = self._rollback_reported(key, attempt)
        if row is None:
            return False
        row.attempts = max(row.attempts, attempt)
        error, delay = _retry(self._config(row), key, attempt, error, **how)
        row.error = error
        if delay is None:
            row.state = step_transition(row.type, row.state, StepEvent.GIVE_UP)
            row.finished_at = now
            self._touch_step(row)
            self._end_rollback(error, now)
            return True
        row.state = step_transition(row.type, row.state, StepEvent.RETRY)
        row.wake_at = now + delay
        self._touch_step(row)
        self._touch()  # the instance row carries next_wake for the store's alarms
        return True

    def rollback_missing(self, key: StepKey, now: int) -> bool:
        """The runtime has no handler for rollback row ``key`` (rule 5): the rollback fails
        with ``RollbackMissing``."""
        if not self.rolling_back:
            return False
        if self._rb_in_flight is not None and self._rb_in_flight[0] == key:
            self._rb_in_flight = None
        row = self._steps.get(key)
        if row is None or row.state not in rb.UNFINISHED:
            return False
        if row.state != rb.REGISTERED:
            row.state = step_transition(row.type, row.state, StepEvent.ATTEMPT)
        row.state = step_transition(row.type, row.state, StepEvent.GIVE_UP)
        row.error = rb.MISSING
        row.wake_at = None
        row.finished_at = now
        self._touch_step(row)
        self._end_rollback(rb.MISSING, now)
        return True

    def _end_rollback(
        self, error: ErrorInfo | None, now: int, *, reason: str | None = None
    ) -> None:
        """Rule 6: the rollback is over (``error``: it failed); the instance ends as the
        rollback's reason (or ``reason``) says."""
        phase = self._phase
        assert phase is not None and phase.error is not None
        info = rb.phase_info(phase)
        event = StepEvent.SUCCEED if error is None else StepEvent.GIVE_UP
        phase.state = step_transition(phase.type, phase.state, event)
        rb.end_phase(phase, error, now)
        self._touch_step(phase)
        self._timed = {k for k in self._timed if k.type != rb.ROLLBACK}
        if (reason or info["reason"]) == rb.REASON_TERMINATE:
            self._finish(_E.TERMINATE, now, self._state.error_retention_ms)
            return
        self._state.error = status_error(phase.error) if info.get("fold") else phase.error
        self._state.output = None
        self._finish(_E.FAIL, now, self._state.error_retention_ms)

    def restart(self, now: int, from_: dict[str, Any] | None = None) -> None:
        """Run again from scratch (same id and params): every step and buffered event is
        wiped. With ``from_={name, count=1, type="do"}`` only that step and every step started
        after it are wiped (and events those waits consumed); earlier results replay."""
        if from_ is not None:
            self._need_history("restart() from a step")
            target = self._restart_target(from_)
            for row in list(self._steps.values()):
                if row.seq >= target.seq:
                    self._delete_step(row.key)
        else:
            self._steps.clear()
            self._configs.clear()
            self._timed.clear()
            self._events.clear()
            self._buffer.clear()
            self._dirty_steps.clear()
            self._deleted_steps.clear()
            self._dirty_events.clear()
            self._deleted_events.clear()
            self._wiped = True
            self._history_dropped = False  # nothing is left to restore
        if self._phase is not None:  # rule 7: a restart forgets the rollback
            if not self._wiped:
                self._dirty_steps.pop(rb.PHASE_KEY, None)
                self._deleted_steps.add(rb.PHASE_KEY)
            self._phase = None
        self._go(_E.RESTART)
        state = self._state
        state.generation += 1
        state.output = None
        state.error = None
        state.started_at = state.finished_at = state.paused_at = state.expires_at = None
        self._clear_run()

    def _restart_target(self, from_: dict[str, Any]) -> StepRecord:
        if not isinstance(from_, dict):
            raise InvalidRestartTargetError("from must be an object {name, count?, type?}")
        name = from_.get("name")
        count = from_.get("count", 1)
        step_type = from_.get("type", "do")
        if not isinstance(name, str):
            raise InvalidRestartTargetError("from.name must be a string")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidRestartTargetError("from.count must be a whole number >= 1")
        if step_type not in STEP_TYPES:
            raise InvalidRestartTargetError('from.type must be "do", "sleep" or "waitForEvent"')
        row = self._steps.get(StepKey(step_type, name, count))
        if row is None:
            raise CannotRestartError(name)
        return row

    def _delete_step(self, key: StepKey) -> None:
        self._steps.pop(key)
        self._configs.pop(key, None)
        self._timed.discard(key)
        self._dirty_steps.pop(key, None)
        self._deleted_steps.add(key)
        if key.type == "waitForEvent":
            for seq in [s for s, ev in self._events.items() if ev.consumed_by == key]:
                del self._events[seq]
                self._dirty_events.pop(seq, None)
                self._deleted_events.add(seq)


class HistoryDropped(RuntimeError):
    """A caller asked for history the machine dropped from memory without restoring it
    (a bug in the caller, never a user error)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} needs the finished steps: call restore_history() first")


def _retry(
    config: StepConfig,
    key: StepKey,
    attempt: int,
    error: ErrorInfo | None,
    *,
    nonretryable: bool = False,
    timed_out: bool = False,
    delay_ms: int | float | str | None = None,
    delay_error: ErrorInfo | None = None,
    delay_timed_out: bool = False,
) -> tuple[ErrorInfo, int | None]:
    """After failed ``attempt``: the error to record and the delay before the next attempt,
    or ``None`` when the step (or rollback handler) fails for good. Shared by steps and
    rollback handlers, which follow the same retry rules."""
    if timed_out:
        error = timeout_error(config.timeout_ms)
    elif error is None:
        error = ErrorInfo("Error", "")
    if nonretryable or is_non_retryable(error) or attempt > config.limit:
        return error, None
    if delay_error is not None:
        return delay_threw(key.name, key.count, delay_error.message), None
    if delay_timed_out:
        return delay_timeout_error(key.name, key.count), None
    base = config.delay_ms
    if delay_ms is not None:
        try:
            base = parse_duration(delay_ms)
        except DurationError:
            return delay_invalid(key.name, key.count), None
    elif base is None:  # dynamic delay but JS sent nothing: fall back to the default
        base = DEFAULT_DELAY_MS
    return error, retry_delay_ms(config.backoff, base, attempt)


def _thrown(error: ErrorInfo) -> Reject:
    """A step call the engine refuses (bad name, config, duration, event type; over the step
    limit): thrown into ``run()``, which may catch it. As in wrangler dev, where the step call
    is an RPC to the engine, it arrives folded: ``Error`` with ``"WorkflowFatalError: ..."``.
    Not recorded: the same call gets the same answer on every replay."""
    return Reject(status_error(error))


def _wait_timeout_ms(row: StepRecord) -> int:
    if row.config:
        return int(json.loads(row.config).get("timeout_ms", DEFAULT_WAIT_TIMEOUT_MS))
    return DEFAULT_WAIT_TIMEOUT_MS


def _is_finite_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value == value and value not in (float("inf"), float("-inf"))
