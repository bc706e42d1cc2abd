"""How bytes cross the bridge for the storage bindings.

The bridge carries JSON text, and base64 in QuickJS is slow (about 4 s to decode 5 MiB, in
pure JS), so bytes that are valid UTF-8 travel as a JSON string, ``{"text": ...}``, and only
other bytes as ``{"b64": ...}``. JS sends a string value as ``text`` too, and Python encodes it
(as TextEncoder would: lone surrogates become U+FFFD).
"""

from __future__ import annotations

import base64
from typing import Any

from celld.bindings.errors import type_error


def to_wire(data: bytes) -> dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def from_wire(value: Any) -> bytes:
    """`{"text"}`, `{"b64"}` or None (no body) -> bytes."""
    if value is None:
        return b""
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return encode_text(value["text"])
        if isinstance(value.get("b64"), str):
            return base64.b64decode(value["b64"])
    raise type_error("celld: a binding value must arrive as {text} or {b64}")


def encode_text(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: replace them as TextEncoder does.
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return fixed.encode("utf-8", "replace")
