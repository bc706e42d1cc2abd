import pytest

from celld.engine import (
    InvalidEventTypeError,
    InvalidIdError,
    InvalidRetentionError,
    PayloadTooLargeError,
    step_name_ok,
    validate_event_payload,
    validate_event_type,
    validate_instance_id,
    validate_params,
    validate_retention,
)
from celld.engine.durations import DAY_MS


@pytest.mark.parametrize("good", ["a", "_x", "A-b_c-1", "9", "x" * 100])
def test_valid_ids(good):
    assert validate_instance_id(good) == good
    assert validate_event_type(good) == good


@pytest.mark.parametrize("bad", ["", "bad id!", "-leading-dash", "x" * 101, "a.b", "a:b", None, 5])
def test_invalid_ids(bad):
    with pytest.raises(InvalidIdError, match=r"\(instance.invalid_id\)"):
        validate_instance_id(bad)
    with pytest.raises(InvalidEventTypeError, match="invalid_event_type"):
        validate_event_type(bad)


def test_step_names():
    assert step_name_ok("x" * 256)
    assert step_name_ok("with spaces and ünïcode")
    assert not step_name_ok("x" * 257)
    assert not step_name_ok("a\nb")
    assert not step_name_ok("a\x00")
    assert not step_name_ok("a\x1f")
    assert step_name_ok("a\x7f")


def test_payload_sizes():
    limit = 1_048_576
    validate_params("x" * limit)
    validate_event_payload("x" * limit)
    with pytest.raises(PayloadTooLargeError, match="params"):
        validate_params("x" * (limit + 1))
    # counted in UTF-8 bytes, not characters
    with pytest.raises(PayloadTooLargeError):
        validate_event_payload("é" * (limit // 2 + 1))
    validate_event_payload("é" * (limit // 2))


def test_retention():
    assert validate_retention(None) == (30 * DAY_MS, 30 * DAY_MS)
    assert validate_retention({"successRetention": "1 day"}) == (DAY_MS, 30 * DAY_MS)
    assert validate_retention({"errorRetention": 5000}) == (30 * DAY_MS, 5000)
    assert validate_retention({"successRetention": "30 days", "errorRetention": "4 weeks"}) == (
        30 * DAY_MS,
        28 * DAY_MS,
    )
    for bad in (
        {"successRetention": "31 days"},
        {"errorRetention": "1 year"},
        {"successRetention": "soon"},
        {"keep": "1 day"},
        "1 day",
    ):
        with pytest.raises(InvalidRetentionError):
            validate_retention(bad)
