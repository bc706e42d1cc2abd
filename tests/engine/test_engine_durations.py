import math

import pytest

from celld.engine import DurationError, parse_duration
from celld.engine.durations import DAY_MS


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        (0, 0),
        (1500, 1500),
        (2.4, 2),
        (2.5, 3),
        ("100", 100),
        ("2.5", 3),
        ("1 second", 1000),
        ("10 seconds", 10_000),
        ("1.5 seconds", 1500),
        ("2   minutes", 120_000),
        ("1 hour", 3_600_000),
        ("3 hours", 10_800_000),
        ("1 day", DAY_MS),
        ("2 weeks", 14 * DAY_MS),
        ("1 month", 30 * DAY_MS),
        ("1 year", 365 * DAY_MS),
        ("2 years", 730 * DAY_MS),
        (".5 minute", 30_000),
    ],
)
def test_valid(value, ms):
    assert parse_duration(value) == ms


@pytest.mark.parametrize(
    "value",
    [
        "10s",
        "1h",
        "1 fortnight",
        "1 ms",
        "1 Seconds",
        "-1 second",
        -1,
        -0.5,
        math.nan,
        math.inf,
        True,
        False,
        None,
        "",
        " 1 second",
        "1 second ",
        "one second",
        "1\tsecond",
        [],
    ],
)
def test_invalid(value):
    with pytest.raises(DurationError) as info:
        parse_duration(value)
    assert repr(value) in str(info.value)


def test_duration_error_is_value_error():
    assert issubclass(DurationError, ValueError)
