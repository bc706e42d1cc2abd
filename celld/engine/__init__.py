"""celld's replay engine: pure decisions over an instance's journal (no I/O, no clocks).

The model, in brief:

* A workflow instance runs ``run(event, step)`` in a JS isolate, from the top, as often as
  needed (after hibernation, a crash, a resume). Each ``step.do/sleep/sleepUntil/
  waitForEvent`` call that is not already finished becomes a call on :class:`Machine`, which
  answers with a decision: :class:`Resolve`, :class:`Reject`, :class:`Run` (run the callback),
  :class:`Suspend` (pending until a deadline or an event) or :class:`Fail` (the instance fails).
* A step is identified by :class:`StepKey` ``(type, name, count)``; count is the 1-based number
  of earlier calls with that type and name in the run.
* What must survive is recorded in plain records (:class:`InstanceState`, :class:`StepRecord`,
  :class:`EventRecord`); the caller commits :meth:`Machine.take_changes` before delivering a
  decision to JS (commit before acknowledge).
* The lifecycle is an explicit table (:mod:`celld.engine.lifecycle`).
* Time is always passed in as ``now`` (epoch ms); values are opaque serialized JSON text.
"""

from .backoff import BACKOFFS, retry_delay_ms
from .decisions import Decision, Fail, JournalEntry, Reject, Resolve, Run, RunStart, Suspend
from .durations import DurationError, parse_duration
from .errors import (
    AlreadyExistsError,
    BatchTooLargeError,
    CannotRestartError,
    CannotSendEventError,
    CannotTerminateError,
    EmptyBatchError,
    ErrorInfo,
    InvalidEventTypeError,
    InvalidIdError,
    InvalidRestartTargetError,
    InvalidRetentionError,
    InvalidWorkflowNameError,
    NotFoundError,
    PayloadTooLargeError,
    WorkflowError,
    is_non_retryable,
    status_error,
)
from .lifecycle import (
    ACTIVE,
    FINAL,
    OPERATOR_ACTIONS,
    TRANSITIONS,
    LifecycleError,
    LifecycleEvent,
    Status,
    allowed_actions,
    transition,
)
from .machine import DEFAULT_STEP_LIMIT, Machine, event_json
from .state import Changes, EventRecord, InstanceState, StepKey, StepRecord
from .stepconfig import StepConfig, StepConfigError, parse_step_config, resolve_step_config
from .validation import (
    MAX_PAYLOAD_BYTES,
    check_payload_size,
    step_name_ok,
    validate_event_payload,
    validate_event_type,
    validate_instance_id,
    validate_params,
    validate_retention,
    validate_workflow_name,
)

__all__ = [
    "ACTIVE",
    "BACKOFFS",
    "DEFAULT_STEP_LIMIT",
    "FINAL",
    "MAX_PAYLOAD_BYTES",
    "OPERATOR_ACTIONS",
    "TRANSITIONS",
    "AlreadyExistsError",
    "BatchTooLargeError",
    "CannotRestartError",
    "CannotSendEventError",
    "CannotTerminateError",
    "Changes",
    "Decision",
    "DurationError",
    "EmptyBatchError",
    "ErrorInfo",
    "EventRecord",
    "Fail",
    "InstanceState",
    "InvalidEventTypeError",
    "InvalidIdError",
    "InvalidRestartTargetError",
    "InvalidRetentionError",
    "InvalidWorkflowNameError",
    "JournalEntry",
    "LifecycleError",
    "LifecycleEvent",
    "Machine",
    "NotFoundError",
    "PayloadTooLargeError",
    "Reject",
    "Resolve",
    "Run",
    "RunStart",
    "Status",
    "StepConfig",
    "StepConfigError",
    "StepKey",
    "StepRecord",
    "Suspend",
    "WorkflowError",
    "check_payload_size",
    "event_json",
    "is_non_retryable",
    "parse_duration",
    "parse_step_config",
    "resolve_step_config",
    "retry_delay_ms",
    "status_error",
    "step_name_ok",
    "allowed_actions",
    "transition",
    "validate_event_payload",
    "validate_event_type",
    "validate_instance_id",
    "validate_params",
    "validate_retention",
    "validate_workflow_name",
]
