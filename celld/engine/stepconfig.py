"""``step.do`` configuration: strict validation, defaults, and the stored form.

The JS side passes the user's config object as JSON. A ``retries.delay`` that is a function
cannot cross as JSON, so JS replaces it with the marker ``{"$fn": true}`` (passing
``dynamic_delay=True`` instead, with ``delay`` absent or the marker, means the same). The
function itself stays in JS; after a failed attempt that will be retried, JS calls it and
reports the result through ``Machine.attempt_failed(delay_ms=...)``.

Defaults (docs/semantics.md): 5 retries after the first attempt, delay 10 s, exponential, timeout
10 minutes per attempt. Given values keep their original form for ``ctx.config`` (as the local
engine does: ``"30 seconds"`` stays a string) and are also stored as milliseconds.

The config is fixed the first time a step occurrence runs; replays reuse the stored JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from .backoff import BACKOFFS
from .durations import MINUTE_MS, DurationError, parse_duration
from .errors import ErrorInfo, invalid_step_config

DEFAULT_LIMIT = 5
DEFAULT_DELAY_MS = 10_000
DEFAULT_BACKOFF = "exponential"
DEFAULT_TIMEOUT = "10 minutes"
DEFAULT_TIMEOUT_MS = 10 * MINUTE_MS
MAX_RETRY_LIMIT = 10_000
DYNAMIC_MARKER_KEY = "$fn"
#: How a function delay is shown in a stored config (the local engine's marker).
DYNAMIC_DELAY_SHOWN = "[dynamic]"

_TOP_KEYS = frozenset({"retries", "timeout", "sensitive"})
_RETRY_KEYS = frozenset({"limit", "delay", "backoff"})


class StepConfigError(ValueError):
    """The step config is invalid.

    ``detail`` says what is wrong (for logs). Raised by :func:`resolve_step_config`, ``str()``
    and :attr:`error` carry the user-visible fatal message naming the step.
    """

    def __init__(self, detail: str, step_name: str | None = None) -> None:
        self.detail = detail
        self.step_name = step_name
        super().__init__(self.error.message if step_name is not None else detail)

    @property
    def error(self) -> ErrorInfo:
        return invalid_step_config(self.step_name if self.step_name is not None else "")


@dataclass(frozen=True, slots=True)
class StepConfig:
    """A resolved step config. ``delay_ms`` is ``None`` when the delay is a JS function."""

    limit: int = DEFAULT_LIMIT
    delay: int | float | str | None = DEFAULT_DELAY_MS
    delay_ms: int | None = DEFAULT_DELAY_MS
    backoff: str = DEFAULT_BACKOFF
    timeout: int | float | str = DEFAULT_TIMEOUT
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    sensitive: str | None = None

    @property
    def dynamic_delay(self) -> bool:
        return self.delay_ms is None

    def to_context(self) -> dict[str, Any]:
        """``ctx.config`` for the callback; the delay is omitted when it is a function."""
        retries: dict[str, Any] = {"limit": self.limit}
        if not self.dynamic_delay:
            retries["delay"] = self.delay
        retries["backoff"] = self.backoff
        ctx: dict[str, Any] = {"retries": retries, "timeout": self.timeout}
        if self.sensitive is not None:
            ctx["sensitive"] = self.sensitive
        return ctx

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "limit": self.limit,
            "delay": DYNAMIC_DELAY_SHOWN if self.dynamic_delay else self.delay,
            "delay_ms": self.delay_ms,
            "backoff": self.backoff,
            "timeout": self.timeout,
            "timeout_ms": self.timeout_ms,
        }
        if self.sensitive is not None:
            data["sensitive"] = self.sensitive
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> StepConfig:
        data = json.loads(text)
        delay_ms = data.get("delay_ms")
        return cls(
            limit=int(data["limit"]),
            delay=None if delay_ms is None else data.get("delay"),
            delay_ms=None if delay_ms is None else int(delay_ms),
            backoff=str(data["backoff"]),
            timeout=data["timeout"],
            timeout_ms=int(data["timeout_ms"]),
            sensitive=data.get("sensitive"),
        )


def _is_marker(value: object) -> bool:
    return isinstance(value, dict) and value.get(DYNAMIC_MARKER_KEY) is True and len(value) == 1


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _duration(value: object) -> int:
    if not (_is_number(value) or isinstance(value, str)):
        raise StepConfigError(f"not a duration: {value!r}")
    try:
        return parse_duration(value)  # type: ignore[arg-type]
    except DurationError as exc:
        raise StepConfigError(str(exc)) from None


def _limit(value: object) -> int:
    if not _is_number(value):
        raise StepConfigError(f"retries.limit must be a number, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise StepConfigError(f"retries.limit must be a whole number, got {value!r}")
        value = int(value)
    if not 0 <= value <= MAX_RETRY_LIMIT:  # type: ignore[operator]
        raise StepConfigError(f"retries.limit must be 0..{MAX_RETRY_LIMIT}, got {value!r}")
    return value  # type: ignore[return-value]


def parse_step_config(raw: dict[str, Any] | None, *, dynamic_delay: bool = False) -> StepConfig:
    """Validate ``raw`` strictly and merge defaults; raise :class:`StepConfigError`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise StepConfigError("config must be an object")
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise StepConfigError(f"unknown key(s): {', '.join(sorted(unknown))}")

    limit, delay, delay_ms, backoff = DEFAULT_LIMIT, DEFAULT_DELAY_MS, DEFAULT_DELAY_MS, None
    if "retries" in raw:
        retries = raw["retries"]
        if not isinstance(retries, dict):
            raise StepConfigError("retries must be an object")
        unknown = set(retries) - _RETRY_KEYS
        if unknown:
            raise StepConfigError(f"unknown retries key(s): {', '.join(sorted(unknown))}")
        if "limit" not in retries:
            raise StepConfigError("retries.limit is required")
        limit = _limit(retries["limit"])
        raw_delay = retries.get("delay")
        if _is_marker(raw_delay) or (dynamic_delay and raw_delay is None):
            delay, delay_ms = None, None
        elif "delay" not in retries:
            raise StepConfigError("retries.delay is required")
        else:
            delay, delay_ms = raw_delay, _duration(raw_delay)
        if "backoff" in retries:
            backoff = retries["backoff"]
            if backoff not in BACKOFFS:
                raise StepConfigError(f"retries.backoff must be one of {BACKOFFS}")
    elif dynamic_delay:
        raise StepConfigError("a delay function needs a retries object")

    timeout, timeout_ms = DEFAULT_TIMEOUT, DEFAULT_TIMEOUT_MS
    if "timeout" in raw:
        timeout = raw["timeout"]
        timeout_ms = _duration(timeout)
        if timeout_ms <= 0:
            raise StepConfigError("timeout must be greater than 0")

    sensitive = raw.get("sensitive")
    if "sensitive" in raw and sensitive != "output":
        raise StepConfigError('sensitive must be "output"')

    return StepConfig(
        limit=limit,
        delay=delay,
        delay_ms=delay_ms,
        backoff=backoff or DEFAULT_BACKOFF,
        timeout=timeout,
        timeout_ms=timeout_ms,
        sensitive=sensitive,
    )


def resolve_step_config(
    name: str, raw: dict[str, Any] | None, *, dynamic_delay: bool = False
) -> StepConfig:
    """:func:`parse_step_config` whose error carries the fatal message naming step ``name``:
    ``Step config for "<name>" is in a invalid format. See <docs>``."""
    try:
        return parse_step_config(raw, dynamic_delay=dynamic_delay)
    except StepConfigError as exc:
        raise StepConfigError(exc.detail, name) from None


#: Resolved configs by their raw form: a workflow's steps share a few configs, and the
#: step path resolves one per new step.
_RESOLVED: dict[tuple[bytes | None, bool], tuple[StepConfig, str]] = {}
_RESOLVED_MAX = 512


def resolve_cached(
    name: str, raw: dict[str, Any] | None, dynamic_delay: bool = False
) -> tuple[StepConfig, str]:
    """:func:`resolve_step_config` and the config's JSON (its step row's text), remembered
    for configs seen before (only valid ones: an invalid config raises every time, naming
    its step)."""
    try:
        form = None if raw is None else orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not plain JSON data: resolved (and refused) without the cache
        config = resolve_step_config(name, raw, dynamic_delay=dynamic_delay)
        return config, config.to_json()
    found = _RESOLVED.get((form, dynamic_delay))
    if found is None:
        config = resolve_step_config(name, raw, dynamic_delay=dynamic_delay)
        found = (config, config.to_json())
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[(form, dynamic_delay)] = found
    return found
