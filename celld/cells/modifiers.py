"""Test modifiers of one instance: what Cloudflare's `introspectWorkflow` and
`introspectWorkflowInstance` (`cloudflare:test`) let a test change about a run.

Pure data and rules; the run consults them when a step is called or an attempt is
about to start (celld.cells.run), and what they cause is recorded like anything real:
a mocked result is the step's output in the journal, a mocked error or forced timeout
is a failed attempt (retried as the step's config says), a disabled sleep ends at once.

A step is selected by `{name, index}`: `index` (1-based, default 1) picks the index-th
call of that name and kind in a run, as the engine counts them. The operations:

* `disableSleeps(steps?)`: every sleep, or the selected ones, end as soon as reached.
* `disableRetryDelays(steps?)`: failed attempts of every `step.do` (or the selected
  ones) are retried at once.
* `mockStepResult(step, result)`: the step returns `result` without running its
  callback (once per step).
* `mockStepError(step, error, times?)` and `forceStepTimeout(step, times?)`: attempts
  fail with `error`, or time out with the error the step's own timeout gives. With
  `times` they take the next `times` attempt numbers (the two share one count, so
  "fail twice, then time out once" is two calls); without it, every attempt.
  A mocked error or timeout comes before a mocked result for the same attempt.
* `mockEvent({type, payload})`: the event is sent to the instance (buffered until a
  `waitForEvent` of that type takes it).
* `forceEventTimeout(step)`: the wait times out at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from celld.engine import ErrorInfo, WorkflowError, validate_event_payload, validate_event_type

#: (name, index)
Selector = tuple[str, int]

OPERATIONS = (
    "disableSleeps",
    "disableRetryDelays",
    "mockStepResult",
    "mockStepError",
    "forceStepTimeout",
    "mockEvent",
    "forceEventTimeout",
)
MAX_NAME = 256
MAX_TIMES = 10_000


class ModifierError(ValueError):
    """An operation celld refuses: `status` 400 for bad input, 409 for a conflict."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Operation:
    """One validated modifier operation (values already in the serializer's text)."""

    type: str
    steps: tuple[Selector, ...] | None = None
    step: Selector | None = None
    result: str | None = None
    error: ErrorInfo | None = None
    times: int | None = None
    event_type: str | None = None
    payload: str | None = None

    def describe(self) -> dict[str, Any]:
        """The operation as it was given (values as their serializer text)."""
        view: dict[str, Any] = {"type": self.type}
        if self.steps is not None:
            view["steps"] = [{"name": n, "index": i} for n, i in self.steps]
        if self.step is not None:
            view["step"] = {"name": self.step[0], "index": self.step[1]}
        if self.error is not None:
            view["error"] = self.error.to_dict()
        if self.times is not None:
            view["times"] = self.times
        if self.event_type is not None:
            view["event"] = {"type": self.event_type}
        return view


def _selector(raw: Any, where: str) -> Selector:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise ModifierError(f"{where} must be an object {{name, index?}}")
    name = raw.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise ModifierError(f"{where}.name must be a step name (1 to {MAX_NAME} characters)")
    index = raw.get("index", 1)
    if index is None:
        index = 1
    if isinstance(index, bool) or not isinstance(index, int) or index < 1:
        raise ModifierError(f"{where}.index must be a whole number >= 1, not {index!r}")
    return (name, index)


def _times(raw: Any) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_TIMES:
        raise ModifierError(f"times must be a whole number from 1 to {MAX_TIMES}, not {raw!r}")
    return raw


def parse_operation(raw: Any, encode: Callable[[Any], str]) -> Operation:
    """Validate one operation as Cloudflare's introspection API shapes it, e.g.
    `{"type": "mockStepError", "step": {"name": "charge"}, "error": {"message": "no"},
    "times": 2}`. `encode` turns a JSON value into the serializer's text."""
    if not isinstance(raw, dict):
        raise ModifierError("each operation must be an object {type, ...}")
    kind = raw.get("type")
    if kind not in OPERATIONS:
        raise ModifierError(f"operation type must be one of {', '.join(OPERATIONS)}, not {kind!r}")
    if kind in ("disableSleeps", "disableRetryDelays"):
        steps = raw.get("steps")
        if steps is None:
            return Operation(kind)
        if not isinstance(steps, list):
            raise ModifierError(f"{kind}: steps must be an array of {{name, index?}}")
        return Operation(kind, steps=tuple(_selector(s, "steps[]") for s in steps))
    if kind == "mockEvent":
        event = raw.get("event")
        if not isinstance(event, dict):
            raise ModifierError("mockEvent: event must be an object {type, payload}")
        payload = encode(event["payload"]) if "payload" in event else '{"$":"undefined"}'
        try:
            validate_event_type(event.get("type"))
            validate_event_payload(payload)
        except WorkflowError as error:
            raise ModifierError(f"mockEvent: {error.message}") from None
        return Operation(kind, event_type=str(event["type"]), payload=payload)
    step = _selector(raw.get("step"), f"{kind}: step")
    if kind == "mockStepResult":
        if "stepResult" not in raw:
            raise ModifierError("mockStepResult: stepResult (the value to return) is required")
        return Operation(kind, step=step, result=encode(raw["stepResult"]))
    if kind == "mockStepError":
        error = raw.get("error")
        if isinstance(error, str):
            error = {"message": error}
        if not isinstance(error, dict) or not isinstance(error.get("message", ""), str):
            raise ModifierError("mockStepError: error must be an object {name?, message}")
        name = error.get("name", "Error")
        if not isinstance(name, str) or not name:
            raise ModifierError("mockStepError: error.name must be a non-empty string")
        info = ErrorInfo(name, str(error.get("message", "")))
        return Operation(kind, step=step, error=info, times=_times(raw.get("times")))
    if kind == "forceStepTimeout":
        return Operation(kind, step=step, times=_times(raw.get("times")))
    return Operation(kind, step=step)  # forceEventTimeout


@dataclass
class StepMocks:
    """What is mocked for one `step.do`: per attempt number, or for every attempt."""

    result: str | None = None
    has_result: bool = False
    every_error: ErrorInfo | None = None
    every_timeout: bool = False
    errors: dict[int, ErrorInfo] = field(default_factory=dict)
    timeouts: set[int] = field(default_factory=set)
    #: the next attempt number a `times` count takes
    next_attempt: int = 1

    def take(self, times: int) -> range:
        start = self.next_attempt
        self.next_attempt += times
        return range(start, start + times)


@dataclass(frozen=True)
class Mocked:
    """What an attempt does instead of running its callback."""

    kind: str  # "result" | "error" | "timeout"
    value: str | None = None
    error: ErrorInfo | None = None


@dataclass
class Modifiers:
    """Everything a test changed about one instance's runs."""

    all_sleeps: bool = False
    sleeps: set[Selector] = field(default_factory=set)
    all_retry_delays: bool = False
    retry_delays: set[Selector] = field(default_factory=set)
    steps: dict[Selector, StepMocks] = field(default_factory=dict)
    event_timeouts: set[Selector] = field(default_factory=set)
    operations: list[Operation] = field(default_factory=list)

    def apply(self, op: Operation) -> None:
        """Add `op` (a mockEvent is delivered by the caller; it is only listed here).
        Raises ModifierError (409) for what Cloudflare refuses too: a second mocked result
        for a step, or an error or timeout mocked after the step's result."""
        if op.type == "disableSleeps":
            if op.steps is None:
                self.all_sleeps = True
            else:
                self.sleeps.update(op.steps)
        elif op.type == "disableRetryDelays":
            if op.steps is None:
                self.all_retry_delays = True
            else:
                self.retry_delays.update(op.steps)
        elif op.type == "forceEventTimeout":
            assert op.step is not None
            self.event_timeouts.add(op.step)
        elif op.type != "mockEvent":
            self._apply_step(op)
        self.operations.append(op)

    def _apply_step(self, op: Operation) -> None:
        assert op.step is not None
        name = op.step[0]
        mocks = self.steps.setdefault(op.step, StepMocks())
        if op.type == "mockStepResult":
            if mocks.has_result:
                raise ModifierError(f"step {name!r} already has a mocked result", 409)
            mocks.result, mocks.has_result = op.result, True
            return
        if mocks.has_result:
            what = "an error" if op.type == "mockStepError" else "a timeout"
            raise ModifierError(
                f"step {name!r} already has a mocked result: mock {what} before it", 409
            )
        if op.type == "mockStepError":
            assert op.error is not None
            if op.times is None:
                mocks.every_error = op.error
            else:
                for attempt in mocks.take(op.times):
                    mocks.errors[attempt] = op.error
        elif op.times is None:
            mocks.every_timeout = True
        else:
            mocks.timeouts.update(mocks.take(op.times))

    # -- what the run asks -----------------------------------------------------------------

    def attempt(self, name: str, count: int, attempt: int) -> Mocked | None:
        """What attempt number `attempt` of the `count`-th `step.do(name)` does instead of
        running its callback, if anything."""
        mocks = self.steps.get((name, count))
        if mocks is None:
            return None
        error = mocks.every_error or mocks.errors.get(attempt)
        if error is not None:
            return Mocked("error", error=error)
        if mocks.every_timeout or attempt in mocks.timeouts:
            return Mocked("timeout")
        if mocks.has_result:
            return Mocked("result", value=mocks.result)
        return None

    def mocks_step(self, name: str, count: int) -> bool:
        return (name, count) in self.steps

    def sleep_disabled(self, name: str, count: int) -> bool:
        return self.all_sleeps or (name, count) in self.sleeps

    def retry_delay_disabled(self, name: str, count: int) -> bool:
        return self.all_retry_delays or (name, count) in self.retry_delays

    def event_timeout(self, name: str, count: int) -> bool:
        return (name, count) in self.event_timeouts

    def view(self) -> list[dict[str, Any]]:
        return [op.describe() for op in self.operations]
