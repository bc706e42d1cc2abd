"""Input validation at the edges of the engine (ids, names, sizes, retention).

Each check raises a :class:`~celld.engine.errors.WorkflowError` subclass carrying the message
the Worker sees, except :func:`step_name_ok`, which answers a question: an invalid step name is
not an exception to the caller but a fatal decision of the machine.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .binary import BinaryValue
from .durations import DAY_MS, DurationError, parse_duration
from .errors import (
    EventBufferFullError,
    InvalidEventTypeError,
    InvalidIdError,
    InvalidRetentionError,
    InvalidWorkflowNameError,
    PayloadTooLargeError,
)

ID_PATTERN = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9\-_]*")
MAX_ID_LENGTH = 100
MAX_EVENT_TYPE_LENGTH = 100
MAX_WORKFLOW_NAME_LENGTH = 64
MAX_STEP_NAME_LENGTH = 256
MAX_PAYLOAD_BYTES = 1_048_576  # 1 MiB: params, event payloads, step results and run() output
#: Events sent but not yet received by a waitForEvent, per instance. celld's own bound:
#: Cloudflare caps an instance's stored state (1 GB on Workers Paid), and this many
#: events of at most 1 MiB each stay inside it.
MAX_BUFFERED_EVENTS = 1_000
MAX_RETENTION_MS = 30 * DAY_MS
DEFAULT_RETENTION_MS = 30 * DAY_MS

_CONTROL_CHARS = re.compile(r"[\x00-\x1f]")


def _id_ok(value: object, max_length: int) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= max_length
        and ID_PATTERN.fullmatch(value) is not None
    )


def validate_instance_id(instance_id: object) -> str:
    if not _id_ok(instance_id, MAX_ID_LENGTH):
        raise InvalidIdError()
    return instance_id  # type: ignore[return-value]


def validate_event_type(event_type: object) -> str:
    if not _id_ok(event_type, MAX_EVENT_TYPE_LENGTH):
        raise InvalidEventTypeError()
    return event_type  # type: ignore[return-value]


def validate_workflow_name(name: object) -> str:
    if not _id_ok(name, MAX_WORKFLOW_NAME_LENGTH):
        raise InvalidWorkflowNameError()
    return name  # type: ignore[return-value]


def step_name_ok(name: object) -> bool:
    """Step names: at most 256 characters and no U+0000..U+001F."""
    return (
        isinstance(name, str)
        and len(name) <= MAX_STEP_NAME_LENGTH
        and _CONTROL_CHARS.search(name) is None
    )


#: Serializer tags whose "v" is base64 of raw bytes (js/web/serialize.js).
_BINARY_TAGS = frozenset(
    {"ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array",
     "Uint16Array", "Int32Array", "Uint32Array", "Float16Array", "Float32Array",
     "Float64Array", "BigInt64Array", "BigUint64Array"}
)  # fmt: skip


def too_large(text: str, limit: int = MAX_PAYLOAD_BYTES) -> bool:
    """True when the value serialized as ``text`` exceeds ``limit`` bytes: its UTF-8 size,
    with binary data counted by its bytes rather than by the base64 that stores it (so a
    1,000,000-byte stream fits the 1 MiB limit, as in production)."""
    if type(text) is BinaryValue:
        return text.size > limit
    n = len(text)
    if n * 4 <= limit:
        return False
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return False
    if '"v":' not in text:
        return True  # no binary data: the text is the value
    return size - _base64_overhead(text) > limit


def _base64_overhead(text: str) -> int:
    """Bytes the base64 of binary payloads adds over the bytes themselves."""
    try:
        value = json.loads(text)
    except ValueError:
        return 0
    overhead = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            payload = node.get("v")
            if node.get("$") in _BINARY_TAGS and isinstance(payload, str):
                decoded = len(payload) * 3 // 4 - payload[-2:].count("=")
                overhead += len(payload) - decoded
            else:
                stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return overhead


def check_payload_size(what: str, text: str, limit: int = MAX_PAYLOAD_BYTES) -> None:
    """Raise :class:`PayloadTooLargeError` naming ``what`` ("params", "event payload")."""
    if too_large(text, limit):
        size = (
            text.size if type(text) is BinaryValue else len(text.encode("utf-8", "surrogatepass"))
        )
        raise PayloadTooLargeError(what, size, limit)


def validate_params(params: str) -> str:
    check_payload_size("params", params)
    return params


def validate_event_payload(payload: str) -> str:
    check_payload_size("event payload", payload)
    return payload


def check_event_buffer(buffered: int, limit: int = MAX_BUFFERED_EVENTS) -> None:
    """Raise :class:`EventBufferFullError` when ``buffered`` events already wait."""
    if buffered >= limit:
        raise EventBufferFullError(limit)


def validate_retention(retention: dict[str, Any] | None) -> tuple[int, int]:
    """``{successRetention?, errorRetention?}`` -> ``(success_ms, error_ms)``.

    Each value is a Duration of at most 30 days (docs/semantics.md); missing ones default to
    30 days.
    """
    success = error = DEFAULT_RETENTION_MS
    if retention is None:
        return success, error
    if not isinstance(retention, dict):
        raise InvalidRetentionError("expected an object {successRetention?, errorRetention?}")
    unknown = set(retention) - {"successRetention", "errorRetention"}
    if unknown:
        raise InvalidRetentionError(f"unknown key(s) {', '.join(sorted(unknown))}")
    values = []
    for key, default in (("successRetention", success), ("errorRetention", error)):
        raw = retention.get(key)
        if raw is None:
            values.append(default)
            continue
        try:
            ms = parse_duration(raw)
        except DurationError as exc:
            raise InvalidRetentionError(f"{key}: {exc}") from None
        if ms > MAX_RETENTION_MS:
            raise InvalidRetentionError(f"{key} must be at most 30 days, got {raw!r}")
        values.append(ms)
    return values[0], values[1]
