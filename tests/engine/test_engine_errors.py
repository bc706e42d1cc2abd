import pytest

from celld.engine import ErrorInfo, is_non_retryable, status_error
from celld.engine.errors import CannotTerminateError, InvalidIdError, timed_out


@pytest.mark.parametrize(
    "name",
    ["Error", "TypeError", "RangeError", "SyntaxError", "ReferenceError", "EvalError", "URIError",
     "AggregateError"],
)  # fmt: skip
def test_builtin_names_kept(name):
    assert status_error(ErrorInfo(name, "boom")) == ErrorInfo(name, "boom")


def test_non_retryable_kept_with_message():
    err = ErrorInfo("NonRetryableError", "bad input")
    assert status_error(err) == err


def test_custom_names_flattened_like_workerd_rpc():
    assert status_error(ErrorInfo("CustomError", "custom error on attempt 4")) == ErrorInfo(
        "Error", "CustomError: custom error on attempt 4"
    )
    # wrangler dev's waitForEvent timeout shape
    assert status_error(timed_out(2000)) == ErrorInfo(
        "Error", "WorkflowTimeoutError: Execution timed out after 2000ms"
    )
    assert status_error(ErrorInfo("Oops", "")) == ErrorInfo("Error", "Oops")


def test_error_info_round_trip():
    err = ErrorInfo("TypeError", "x é")
    assert ErrorInfo.from_dict(err.to_dict()) == err
    assert ErrorInfo.from_json(err.to_json()) == err


def test_non_retryable_detection_survives_rpc_prefix():
    assert is_non_retryable(ErrorInfo("NonRetryableError", "x"))
    assert is_non_retryable(ErrorInfo("Error", "NonRetryableError: x"))
    assert not is_non_retryable(ErrorInfo("Error", "x"))


def test_workflow_error_messages_and_rpc_shape():
    assert str(CannotTerminateError()) == (
        "(instance.cannot_terminate) Cannot terminate instance since its on a finite state"
    )
    assert status_error(InvalidIdError().info()) == ErrorInfo(
        "Error", "WorkflowError: (instance.invalid_id) Instance has invalid id"
    )
