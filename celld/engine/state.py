"""Durable records: what the store persists for an instance. Flat, typed, no behaviour.

Values (params, step results, event payloads, outputs) are already-serialized JSON text from the
JS serializer; the engine only measures and stores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from .errors import ErrorInfo
from .lifecycle import Status

StepType = Literal["do", "sleep", "waitForEvent"]
STEP_TYPES: tuple[str, ...] = ("do", "sleep", "waitForEvent")

# StepRecord.state values
DO_RUNNING = "running"
DO_RETRYING = "retrying"
DO_DONE = "done"
DO_FAILED = "failed"
SLEEP_SLEEPING = "sleeping"
SLEEP_DONE = "done"
WAIT_WAITING = "waiting"
WAIT_RECEIVED = "received"
WAIT_TIMED_OUT = "timed_out"

#: States in which a step is finished: its outcome is in the journal handed to JS.
FINISHED_STATES = frozenset({DO_DONE, DO_FAILED, WAIT_RECEIVED, WAIT_TIMED_OUT})
#: States whose ``wake_at`` is a live deadline (retry time, sleep end, wait deadline).
TIMED_STATES = frozenset({DO_RETRYING, SLEEP_SLEEPING, WAIT_WAITING})


class StepKey(NamedTuple):
    """A step's identity: (type, name, count); ``str()`` is the JS journal key."""

    type: str
    name: str
    count: int

    def __str__(self) -> str:
        return f"{self.type}:{self.count}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> StepKey:
        step_type, count, name = text.split(":", 2)
        return cls(step_type, name, int(count))


@dataclass(slots=True)
class InstanceState:
    workflow: str
    id: str
    params: str
    created_at: int
    status: Status = Status.QUEUED
    output: str | None = None
    error: ErrorInfo | None = None
    started_at: int | None = None
    finished_at: int | None = None
    paused_at: int | None = None
    success_retention_ms: int = 30 * 86_400_000
    error_retention_ms: int = 30 * 86_400_000
    expires_at: int | None = None
    generation: int = 0
    next_seq: int = 1
    next_event_seq: int = 1
    #: the Worker bundle's hash when the instance was created (version pinning)
    version: str | None = None

    def copied(self) -> InstanceState:
        """A copy (what a commit takes; `copy.copy` of a slots dataclass is ~8x slower)."""
        return InstanceState(
            self.workflow, self.id, self.params, self.created_at, self.status, self.output,
            self.error, self.started_at, self.finished_at, self.paused_at,
            self.success_retention_ms, self.error_retention_ms, self.expires_at,
            self.generation, self.next_seq, self.next_event_seq, self.version,
        )  # fmt: skip


@dataclass(slots=True)
class StepRecord:
    type: str
    name: str
    count: int
    seq: int
    state: str
    attempts: int = 0
    config: str | None = None
    value: str | None = None
    error: ErrorInfo | None = None
    wake_at: int | None = None
    event_type: str | None = None
    started_at: int = 0
    finished_at: int | None = None
    #: `key`, made once (type, name and count never change)
    _key: StepKey | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def key(self) -> StepKey:
        key = self._key
        if key is None:
            key = self._key = StepKey(self.type, self.name, self.count)
        return key

    def copied(self) -> StepRecord:
        """A copy (what a commit takes; `copy.copy` of a slots dataclass is ~8x slower)."""
        row = StepRecord(
            self.type, self.name, self.count, self.seq, self.state, self.attempts, self.config,
            self.value, self.error, self.wake_at, self.event_type, self.started_at,
            self.finished_at,
        )  # fmt: skip
        row._key = self._key
        return row

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


@dataclass(slots=True)
class EventRecord:
    seq: int
    type: str
    payload: str
    timestamp: int
    consumed_by: StepKey | None = None

    def copied(self) -> EventRecord:
        return EventRecord(self.seq, self.type, self.payload, self.timestamp, self.consumed_by)


@dataclass(slots=True)
class Changes:
    """What to commit, in this order: if ``wiped``, delete every step and event row of the
    instance; then delete ``deleted_steps`` and ``deleted_events``; then upsert the rest.
    ``created`` means ``instance`` is a new row (the store enforces id uniqueness)."""

    instance: InstanceState | None = None
    created: bool = False
    steps: list[StepRecord] = field(default_factory=list)
    deleted_steps: list[StepKey] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    deleted_events: list[int] = field(default_factory=list)
    wiped: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.instance is not None
            or self.steps
            or self.deleted_steps
            or self.events
            or self.deleted_events
            or self.wiped
        )
