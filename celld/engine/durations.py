"""Duration parsing: Cloudflare's ``Duration | number`` grammar, to integer milliseconds.

Accepted (and nothing else, because production's parser is not public and a project must run
unchanged on Cloudflare):

* a number (``int``/``float``, not ``bool``): milliseconds;
* a numeric string such as ``"100"`` or ``"2.5"``: milliseconds (as ``+x`` in JavaScript);
* ``"<number> <unit>"`` or ``"<number> <unit>s"`` with one or more spaces, lower-case units
  ``second minute hour day week month year``; the number may have decimals.

``month`` is 30 days and ``year`` is **365 days** (itty-time, used by ``wrangler dev``, says
365.25): production documents 365 days as the longest sleep and wait, and ``"1 year"`` must
name exactly that limit rather than overshoot it by six hours.

Fractional milliseconds are rounded half up, so the result is always an ``int``.
"""

from __future__ import annotations

import math
import re

SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
WEEK_MS = 7 * DAY_MS
MONTH_MS = 30 * DAY_MS
YEAR_MS = 365 * DAY_MS

UNITS_MS: dict[str, int] = {
    "second": SECOND_MS,
    "minute": MINUTE_MS,
    "hour": HOUR_MS,
    "day": DAY_MS,
    "week": WEEK_MS,
    "month": MONTH_MS,
    "year": YEAR_MS,
}

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_NUMERIC_STRING = re.compile(rf"{_NUMBER}(?:[eE][+-]?\d+)?")
_WITH_UNIT = re.compile(rf"({_NUMBER}) +([a-z]+?)s?")


class DurationError(ValueError):
    """A value that is not a valid Workflows duration; the message quotes the value."""


def _invalid(value: object) -> DurationError:
    return DurationError(
        f"Invalid duration {value!r}: expected a number of milliseconds or "
        '"<number> <second|minute|hour|day|week|month|year>[s]"'
    )


def _to_ms(number: float, value: object) -> int:
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise _invalid(value)
    return math.floor(number + 0.5)


def parse_duration(value: str | int | float) -> int:
    """Return ``value`` in whole milliseconds, or raise :class:`DurationError`."""
    if isinstance(value, bool):
        raise _invalid(value)
    if isinstance(value, int):
        if value < 0:
            raise _invalid(value)
        return value
    if isinstance(value, float):
        return _to_ms(value, value)
    if not isinstance(value, str):
        raise _invalid(value)
    if _NUMERIC_STRING.fullmatch(value):
        return _to_ms(float(value), value)
    match = _WITH_UNIT.fullmatch(value)
    if match is None:
        raise _invalid(value)
    number, unit = match.groups()
    factor = UNITS_MS.get(unit)
    if factor is None:
        raise _invalid(value)
    return _to_ms(float(number) * factor, value)
