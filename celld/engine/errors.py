"""Error values and every user-visible error string of the engine, in one place.

Two kinds of error live here:

* :class:`ErrorInfo` is a *value*: the ``{name, message}`` of a JavaScript error as it is
  recorded in the journal, rethrown into ``run()`` or reported by ``status().error``.
* :class:`WorkflowError` and its subclasses are *Python exceptions* raised by the engine's
  binding-level operations (invalid id, terminate of a finished instance, ...). The binding
  layer turns them into the JavaScript error the Worker sees (name ``WorkflowError``; through
  workerd RPC that arrives as ``Error`` with the message ``"WorkflowError: <message>"``, which
  :func:`status_error` of :meth:`WorkflowError.info` reproduces).

Wording (docs/semantics.md): production's strings where they are known (marked "production"
below), else ``wrangler dev``'s verbatim (compat/differences.py names where they differ), else
our own, written to say what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# --------------------------------------------------------------------------------------------
# ErrorInfo


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The name and message of a JavaScript error, as the engine stores and reports it."""

    name: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ErrorInfo:
        return cls(name=str(data.get("name", "Error")), message=str(data.get("message", "")))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ErrorInfo:
        return cls.from_dict(json.loads(text))


#: Error classes that workerd's RPC serialization keeps by name; any other name is folded into
#: the message (``{name: "Error", message: "<Name>: <message>"}``).
BUILTIN_ERROR_NAMES = frozenset(
    {
        "Error",
        "TypeError",
        "RangeError",
        "SyntaxError",
        "ReferenceError",
        "EvalError",
        "URIError",
        "AggregateError",
    }
)

NON_RETRYABLE_ERROR = "NonRetryableError"
FATAL_ERROR = "WorkflowFatalError"
TIMEOUT_ERROR = "WorkflowTimeoutError"
INTERNAL_ERROR = "WorkflowInternalError"
DELAY_ERROR = "NonRetryableDelayError"


def is_non_retryable(error: ErrorInfo) -> bool:
    """True for a ``NonRetryableError``, also once RPC has folded its name into the message."""
    return error.name == NON_RETRYABLE_ERROR or error.message.startswith(NON_RETRYABLE_ERROR)


def status_error(error: ErrorInfo) -> ErrorInfo:
    """The shape ``status().error`` (and any error crossing workerd RPC) reports.

    Built-in JS error names survive; ``NonRetryableError`` keeps its name and message (compat
    flag ``workflows_preserve_non_retryable_error_message``, on by default since 2026-05-14);
    any other name becomes ``Error`` with ``"<Name>: <message>"`` as the message, which is what
    ``wrangler dev`` shows for custom errors and for a ``WorkflowTimeoutError``.
    """
    prefix = f"{NON_RETRYABLE_ERROR}: "
    if error.name == "Error" and error.message.startswith(prefix):
        # a NonRetryableError that crossed into run() folded (as a caught step error does) and
        # was rethrown: the status keeps its own name and message, as the compat flag says
        return ErrorInfo(NON_RETRYABLE_ERROR, error.message[len(prefix) :])
    if error.name in BUILTIN_ERROR_NAMES or error.name == NON_RETRYABLE_ERROR:
        return error
    message = f"{error.name}: {error.message}" if error.message else error.name
    return ErrorInfo("Error", message)


# --------------------------------------------------------------------------------------------
# Messages (ErrorInfo values the machine records or decides)

DOCS_RETRY_URL = "https://developers.cloudflare.com/workflows/build/sleeping-and-retrying/"


def fatal(message: str) -> ErrorInfo:
    """An engine-made fatal error; recorded by name, not folded, as ``wrangler dev`` shows."""
    return ErrorInfo(FATAL_ERROR, message)


def invalid_step_name(name: str) -> ErrorInfo:
    return fatal(f'Step name "{name}" exceeds max length (256 chars) or invalid characters found')


def invalid_step_config(name: str) -> ErrorInfo:
    return fatal(f'Step config for "{name}" is in a invalid format. See {DOCS_RETRY_URL}')


def missing_callback(name: str) -> ErrorInfo:
    return fatal(f'Step "{name}" requires a callback function')


def step_limit_reached(limit: int) -> ErrorInfo:
    return fatal(
        f"The limit of {limit} steps has been reached. "
        "This limit can be changed in your worker configuration."
    )


def not_serialisable(name: str) -> ErrorInfo:
    return fatal(
        "The execution of the Workflow instance was terminated, "
        f'as the step "{name}" returned a value which is not serialisable'
    )


def output_too_large(name: str, count: int) -> ErrorInfo:
    return ErrorInfo(
        INTERNAL_ERROR,
        f"Step {name}-{count} output is too large. Maximum allowed size is 1MiB.",
    )


def run_output_too_large(size: int, limit: int) -> ErrorInfo:
    """run() returned more than a step may: the instance fails instead of storing it."""
    return ErrorInfo(
        INTERNAL_ERROR,
        f"The Workflow instance's output is too large ({size} bytes serialized). "
        f"Maximum allowed size is 1MiB.",
    )


def timed_out(timeout_ms: int) -> ErrorInfo:
    return ErrorInfo(TIMEOUT_ERROR, f"Execution timed out after {timeout_ms}ms")


def delay_threw(name: str, count: int, message: str) -> ErrorInfo:
    return ErrorInfo(
        DELAY_ERROR, f'The delay function for step "{name}-{count}" threw an error: {message}'
    )


def delay_timed_out(name: str, count: int) -> ErrorInfo:
    return ErrorInfo(
        DELAY_ERROR, f'The delay function for step "{name}-{count}" did not return within 5 seconds'
    )


def delay_invalid(name: str, count: int) -> ErrorInfo:
    return ErrorInfo(
        DELAY_ERROR,
        f'The delay function for step "{name}-{count}" returned an invalid delay value '
        '(expected a number of ms or a duration string like "30 seconds")',
    )


#: ``sleepUntil`` with a time in the past (wrangler dev's words; production is silent).
SLEEP_IN_PAST = ErrorInfo("Error", "You can't sleep until a time in the past, time-traveler")


def sleep_too_long(name: str, ms: int, max_ms: int) -> ErrorInfo:
    return fatal(f'Step "{name}": a sleep of {ms} ms exceeds the maximum of 365 days ({max_ms} ms)')


def invalid_sleep(name: str, detail: str) -> ErrorInfo:
    return fatal(f'Step "{name}": {detail}')


def stalled(limit_ms: int) -> ErrorInfo:
    seconds = limit_ms / 1000
    shown = f"{seconds:g}"
    return fatal(
        f"run() has been pending for {shown} s without a step running or waiting; celld fails "
        "instances whose run() waits on work outside a step (put that work inside step.do)"
    )


# --------------------------------------------------------------------------------------------
# Exceptions raised to the binding layer


class WorkflowError(Exception):
    """An error the binding reports to the Worker (JS class name ``WorkflowError``)."""

    js_name = "WorkflowError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def info(self) -> ErrorInfo:
        return ErrorInfo(self.js_name, self.message)


class InvalidIdError(WorkflowError):
    def __init__(self) -> None:
        # production's; wrangler dev says "Workflow instance has invalid id"
        super().__init__("(instance.invalid_id) Instance has invalid id")


class AlreadyExistsError(WorkflowError):
    def __init__(self, instance_id: str) -> None:
        # production's; wrangler dev never checks (its batch error code text is
        # "workflows.api.error.instance.already_exists")
        super().__init__("(instance.already_exists) Instance already exists")
        self.instance_id = instance_id


class NotFoundError(WorkflowError):
    def __init__(self) -> None:
        # production's; wrangler dev says "instance.not_found"
        super().__init__("(instance.not_found) Instance not found")


class CannotTerminateError(WorkflowError):
    def __init__(self) -> None:
        super().__init__(
            "(instance.cannot_terminate) Cannot terminate instance since its on a finite state"
        )


class CannotSendEventError(WorkflowError):
    def __init__(self, status: str) -> None:
        # production documents that sendEvent throws once the instance is not running or
        # errored, but publishes no wording: the code and sentence are ours, in the shape of
        # cannot_terminate (DECISIONS.md)
        super().__init__(
            f"(instance.cannot_send_event) Cannot send event to instance since it is {status}"
        )
        self.status = status


class CannotRestartError(WorkflowError):
    def __init__(self, step_name: str) -> None:
        super().__init__(
            f'(instance.cannot_restart) Step "{step_name}" not found in execution history'
        )


class InvalidEventTypeError(WorkflowError):
    def __init__(self) -> None:
        # production names the code; the rest of the sentence is ours
        super().__init__(
            "(workflow.invalid_event_type) Event type must match ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$ "
            "and be at most 100 characters"
        )


class PayloadTooLargeError(WorkflowError):
    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} is too large: {size} bytes serialized; the maximum is {limit} bytes (1 MiB)"
        )


class EventBufferFullError(WorkflowError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The instance already holds {limit} events that no waitForEvent has received; "
            "sendEvent accepts more once it takes some"
        )


class InvalidRetentionError(WorkflowError):
    def __init__(self, detail: str) -> None:
        super().__init__(f"Invalid retention: {detail}")


class InvalidWorkflowNameError(WorkflowError):
    def __init__(self) -> None:
        super().__init__(
            "Workflow name must match ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$ and be at most 64 characters"
        )


class InvalidRestartTargetError(WorkflowError):
    def __init__(self, detail: str) -> None:
        super().__init__(f"(instance.cannot_restart) {detail}")


class EmptyBatchError(WorkflowError):
    def __init__(self) -> None:
        super().__init__("batchCreate should have at least 1 instance")


class BatchTooLargeError(WorkflowError):
    def __init__(self) -> None:
        super().__init__("batchCreate only supports 100 instances at a time")


class EmptyDeleteBatchError(WorkflowError):
    def __init__(self) -> None:
        super().__init__("(body) batchDeleteInstances should have at least 1 instance")


class DeleteBatchTooLargeError(WorkflowError):
    def __init__(self) -> None:
        super().__init__("(body) batchDeleteInstances only supports 100 instances at a time")
