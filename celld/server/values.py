"""Values between the operator surface and the engine.

The engine stores params, step results, event payloads and outputs as the JS
serializer's tagged JSON (js/web/serialize.js): plain JSON stays as it is, other JS
values become objects with a "$" key. Operators type and read plain JSON, so this
module encodes JSON for the engine (escaping objects that happen to have a "$" key)
and decodes stored values into JSON a person can read (a Date becomes its ISO
string, a Map a list of pairs, and so on). The decoding is for display only: it is
never fed back into a workflow.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from typing import Any

REDACTED = "[REDACTED]"


def iso(ms: int | float | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC string (what wrangler and the page parse)."""
    if ms is None:
        return None
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_iso(text: str) -> int:
    """An ISO 8601 date or date-time as epoch ms; a bare date or a time without a zone is
    UTC. Raises ValueError with the text in the message."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an ISO 8601 date: {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


def _escape(value: Any) -> Any:
    if isinstance(value, dict):
        items = {str(k): _escape(v) for k, v in value.items()}
        if "$" in items:
            return {"$": "Object", "v": [[k, v] for k, v in items.items()]}
        return items
    if isinstance(value, list):
        return [_escape(v) for v in value]
    if isinstance(value, float):
        if math.isnan(value):
            return {"$": "NaN"}
        if math.isinf(value):
            return {"$": "Infinity" if value > 0 else "-Infinity"}
        if value == 0 and math.copysign(1, value) < 0:
            return {"$": "-0"}
    return value


def encode(value: Any) -> str:
    """A JSON value as the serializer's text, so `run()` sees exactly `value`."""
    return json.dumps(_escape(value), ensure_ascii=False, separators=(",", ":"))


def decode(text: str | None) -> Any:
    """Stored serializer text as readable JSON (None for None)."""
    if text is None:
        return None
    return _readable(json.loads(text), {})


def _readable(node: Any, defs: dict[int, Any]) -> Any:
    if isinstance(node, list):
        return [_readable(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    tag = node.get("$")
    if tag is None:
        return {k: _readable(v, defs) for k, v in node.items()}
    value = node.get("v")
    simple: dict[str, Any] = {
        "undefined": None,
        "NaN": "NaN",
        "Infinity": "Infinity",
        "-Infinity": "-Infinity",
        "-0": 0,
    }
    if tag in simple:
        return simple[tag]
    if tag == "Date":
        return iso(value) if isinstance(value, int | float) else "Invalid Date"
    if tag == "BigInt":
        return f"{value}n"
    if tag in ("Boolean", "Number", "String", "BigIntObject"):
        return _readable(value, defs)
    if tag == "Object":
        return {str(k): _readable(v, defs) for k, v in value}
    if tag == "Map":
        return [[_readable(k, defs), _readable(v, defs)] for k, v in value]
    if tag == "Set":
        return [_readable(v, defs) for v in value]
    if tag == "RegExp":
        return f"/{node.get('source', '')}/{node.get('flags', '')}"
    if tag == "Error":
        return {"name": node.get("name"), "message": node.get("message")}
    if tag == "Blobs":  # a value as a message carries it (its bytes beside it)
        return _readable(node.get("v"), defs)
    if tag == "Def":
        readable = _readable(value, defs)
        defs[int(node.get("id", 0))] = readable
        return readable
    if tag == "Ref":
        return defs.get(int(node.get("id", 0)), "[Circular]")
    if isinstance(value, str):  # ArrayBuffer, typed arrays, DataView: bytes in base64
        size = len(base64.b64decode(value)) if value else 0
        return f"[{tag} {size} bytes]"
    blob = node.get("blob")
    if isinstance(blob, list) and len(blob) == 2:  # the same, as bytes (celld/engine/binary.py)
        return f"[{tag} {blob[1]} bytes]"
    return node
