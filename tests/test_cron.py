"""Cron expressions of `schedules` (celld/project/cron.py): ticks in UTC and the ids of
scheduled instances."""

from __future__ import annotations

import pytest

from celld.project import cron

AT_0030 = 1_767_227_400_000  # 2026-01-01T00:30:00Z
MINUTE = 60_000


def test_next_tick_is_strictly_after() -> None:
    assert cron.next_tick("*/30 * * * *", AT_0030 - 1) == AT_0030
    assert cron.next_tick("*/30 * * * *", AT_0030) == AT_0030 + 30 * MINUTE


def test_latest_tick_includes_the_moment_itself() -> None:
    assert cron.latest_tick("*/30 * * * *", AT_0030) == AT_0030
    assert cron.latest_tick("*/30 * * * *", AT_0030 + 59_999) == AT_0030
    assert cron.latest_tick("*/30 * * * *", AT_0030 - 1) == AT_0030 - 30 * MINUTE
    # far in the past: one step back, not a walk over every missed tick
    assert cron.latest_tick("* * * * *", AT_0030 + 365 * 86_400_000) == AT_0030 + 365 * 86_400_000


def test_cloudflare_extensions() -> None:
    feb = 1_769_904_000_000  # 2026-02-01T00:00:00Z
    assert cron.next_tick("0 0 L * *", feb) == 1_772_236_800_000  # 2026-02-28
    assert cron.next_tick("0 9 * * MON-FRI", AT_0030) == AT_0030 + 8 * 3_600_000 + 30 * MINUTE


def test_scheduled_ids_round_trip_and_user_ids_are_not_scheduled() -> None:
    made = cron.scheduled_id("*/30 * * * *", AT_0030)
    assert made == "*/30 * * * *-1767227400000"
    assert cron.parse_scheduled_id(made) == ("*/30 * * * *", AT_0030)
    assert cron.ADDRESSABLE_ID_RE.match(made)
    for user_id in ("order-7", "a-1767227400000", "x"):
        assert cron.parse_scheduled_id(user_id) is None


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("61 * * * *", "Bad minute"),
        ("* * * *", "five fields"),
        ("* * * * * *", "five fields"),
        ("", "must not be empty"),
        ("0 0 31 2 *", "Bad day-of-month"),
    ],
)
def test_invalid_expressions(expression: str, fragment: str) -> None:
    with pytest.raises(cron.CronError, match=fragment):
        cron.validate(expression)
