"""Cron expressions of a workflow's `schedules`: validation, tick times and instance ids.

Expressions are five-field cron in UTC, as Cloudflare's `schedules` are. Parsing and
matching are `cronsim`'s (a small, dependency-free parser that validates every field
strictly, so a typo is a config error rather than a schedule that never fires, and that
knows the extensions Cloudflare's cron accepts: `L`, `W`, `#`, month and weekday names).

Tick times are epoch milliseconds on a minute boundary. A scheduled instance's id is
`"<expression>-<tick ms>"`, Cloudflare's form (`"*/30 * * * *-1786001400000"`): it is the
same for every attempt to start that tick, so the store's id uniqueness makes a tick start
at most one instance, whatever crashes in between.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from cronsim import CronSim, CronSimError

#: Cloudflare's limit on one expression.
MAX_EXPRESSION = 256
#: Ids the binding looks up besides user ids: scheduled ids have spaces, `*`, `/`, `,`, `#`
#: (Cloudflare's "addressable" id rule: up to 271 characters).
ADDRESSABLE_ID_RE = re.compile(r"^[a-zA-Z0-9, */#_-]{1,271}$")
_SCHEDULED_ID_RE = re.compile(r"^(?P<cron>.+ .+)-(?P<tick>\d{1,16})$")


class CronError(ValueError):
    """An expression celld cannot schedule; the message says what is wrong with it."""


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp()) * 1000


def validate(expression: object) -> str:
    """The expression if celld can schedule it; raises :class:`CronError` otherwise."""
    if not isinstance(expression, str):
        raise CronError(f"a cron expression must be a string, not {type(expression).__name__}")
    if not expression.strip():
        raise CronError("a cron expression must not be empty")
    if len(expression) > MAX_EXPRESSION:
        raise CronError(f"a cron expression is at most {MAX_EXPRESSION} characters")
    if len(expression.split()) != 5:
        raise CronError(
            f"{expression!r} is not a cron expression: it needs five fields "
            "(minute hour day-of-month month day-of-week, in UTC)"
        )
    try:
        next(iter(CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))))
    except CronSimError as error:
        raise CronError(f"{expression!r} is not a valid cron expression: {error}") from None
    except StopIteration:
        raise CronError(f"{expression!r} never matches any time") from None
    return expression


def next_tick(expression: str, after_ms: int) -> int:
    """The first tick strictly after `after_ms`."""
    return _ms(next(iter(CronSim(expression, _at(after_ms)))))


def latest_tick(expression: str, at_ms: int) -> int:
    """The last tick at or before `at_ms`."""
    # cronsim steps backwards strictly before its start; ticks are whole minutes, so a
    # start one second past `at_ms` (seconds dropped) includes a tick at `at_ms` itself
    start = _at(at_ms).replace(second=0, microsecond=0) + timedelta(minutes=1)
    return _ms(next(iter(CronSim(expression, start, reverse=True))))


def scheduled_id(expression: str, tick_ms: int) -> str:
    return f"{expression}-{tick_ms}"


def parse_scheduled_id(instance_id: str) -> tuple[str, int] | None:
    """(expression, tick ms) of a scheduled instance's id; None for any other id (user ids
    cannot contain a space, cron expressions always do)."""
    match = _SCHEDULED_ID_RE.match(instance_id)
    if match is None:
        return None
    return match["cron"], int(match["tick"])
