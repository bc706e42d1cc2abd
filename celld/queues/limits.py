"""What a producer may send, checked in one place before anything is stored.

Cloudflare's limits (1 KB = 1000 bytes, as Cloudflare counts): a message body is at most
128 KB, a `sendBatch()` at most 100 messages and 256 KB in all, a delay at most 24 hours.
Bodies are measured as serialized: a `text` or `json` body by its UTF-8 bytes, `bytes` by
its length, `v8` by the length of celld's structured-clone encoding (V8's own encoding
differs, so a value near the limit may pass under one and not the other).

Errors read as workerd's (``Queue send failed: ...`` / ``Queue sendBatch failed: ...``)
with the broker's detail and Cloudflare's documented error code at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from celld.bindings.errors import type_error
from celld.bindings.wire import from_wire
from celld.isolate.host import HostError

MAX_MESSAGE_BYTES = 128_000
MAX_BATCH_MESSAGES = 100
MAX_BATCH_BYTES = 256_000
MAX_DELAY_S = 86_400
CONTENT_TYPES = ("text", "json", "bytes", "v8")


@dataclass(frozen=True)
class Outgoing:
    """One message as it will be stored."""

    body: bytes
    content_type: str
    #: seconds before it may be delivered
    delay_s: int


def _delay(value: Any, method: str, code: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_S:
        raise HostError(
            f"Queue {method} failed: message delay {value} is invalid: it must be a whole "
            f"number of seconds from 0 to {MAX_DELAY_S} ({code})"
        )
    return value


def _message(raw: Any, method: str, default_delay: int) -> Outgoing:
    if not isinstance(raw, dict):
        raise type_error(f"celld: a queue message must arrive as an object, not {raw!r}")
    content_type = raw.get("contentType")
    if content_type not in CONTENT_TYPES:
        raise type_error(f"Unsupported queue message content type: {content_type}")
    delay = _delay(raw.get("delaySeconds"), method, 10203)
    return Outgoing(
        from_wire(raw.get("body")), content_type, default_delay if delay is None else delay
    )


def check_send(message: dict[str, Any]) -> Outgoing:
    """The one message of a `send()`, or the error Cloudflare gives."""
    out = _message(message.get("message"), "send", 0)
    if len(out.body) > MAX_MESSAGE_BYTES:
        raise HostError(
            f"Queue send failed: message length of {len(out.body)} bytes exceeds limit of "
            f"{MAX_MESSAGE_BYTES} (10204)"
        )
    return out


def check_batch(message: dict[str, Any]) -> list[Outgoing]:
    """The messages of a `sendBatch()`, or the error Cloudflare gives."""
    raw = message.get("messages")
    if not isinstance(raw, list) or not raw:
        raise type_error("sendBatch() requires at least one message")
    if len(raw) > MAX_BATCH_MESSAGES:
        raise HostError(
            f"Queue sendBatch failed: batch message count of {len(raw)} exceeds limit of "
            f"{MAX_BATCH_MESSAGES} (10206)"
        )
    batch_delay = _delay(message.get("delaySeconds"), "sendBatch", 10202)
    out = [_message(item, "sendBatch", batch_delay or 0) for item in raw]
    largest = max(len(o.body) for o in out)
    if largest > MAX_MESSAGE_BYTES:
        raise HostError(
            f"Queue sendBatch failed: message in batch has length {largest} bytes which "
            f"exceeds single message size limit of {MAX_MESSAGE_BYTES} (10204)"
        )
    total = sum(len(o.body) for o in out)
    if total > MAX_BATCH_BYTES:
        raise HostError(
            f"Queue sendBatch failed: batch size of {total} bytes exceeds limit of "
            f"{MAX_BATCH_BYTES} (10205)"
        )
    return out
