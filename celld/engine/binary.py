"""Serialized values whose binary data is bytes, not base64 text.

The JS serializer (js/web/serialize.js) writes a value as tagged JSON. Where the host calls
QuickJS directly, the bytes of a value's ArrayBuffers, typed arrays and DataViews do not go
into that text: each such node names a range of the value's *byte area*
(``{"$":"Uint8Array","blob":[offset,length]}``), and the area crosses the bridge as one
ArrayBuffer beside the message text, read and written by QuickJS's own calls (one copy each
way, celld/isolate/native.py). In a message the value is wrapped as
``{"$":"Blobs","at":<attachment id>,"v":<tree>}``.

In Python such a value is a :class:`BinaryValue`: a ``str`` holding the tree's JSON text
(what the engine's rules need of any value: its kind, its text for a limit) with the area
beside it. It is a ``str`` so that the engine, which moves values as opaque serialized text,
takes it unchanged; the places where a value leaves Python encode it explicitly, each in
one function here: the store (:func:`store_form`, :func:`store_bytes`, :func:`load_form`:
one BLOB, the text and then the area, written once), the bridge (:func:`wire_text`) and
the base64 form kept for isolates on the binding's own methods and for readers of text
(:func:`as_base64_text`).
Values stored before this form existed (base64 ``"v"`` nodes) stay readable everywhere.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import orjson
import pybase64

#: How a value with a byte area starts in a message (js/host.js, js/web/serialize.js).
WIRE_PREFIX = '{"$":"Blobs","at":'
_WIRE = re.compile(r'\{"\$":"Blobs","at":(\d+),"v":')
#: The first byte of a stored binary value: JSON text never starts with (or holds) a NUL.
_STORED_MARK = b"\0"

#: Attachment ids for values sent to JS: one counter for the process, so an id is never
#: seen twice by any isolate.
_ids = itertools.count(1)


class BinaryValue(str):
    """A serialized value (its JSON text) and its byte area (see the module's docstring)."""

    area: bytes

    def __new__(cls, text: str, area: bytes = b"") -> BinaryValue:
        value = super().__new__(cls, text)
        value.area = area
        return value

    def __reduce__(self) -> tuple[Any, ...]:
        return (BinaryValue, (str(self), self.area))

    @property
    def size(self) -> int:
        """Bytes the value counts for against a size limit: its text, with binary data
        counted by its bytes."""
        return len(self.encode("utf-8", "surrogatepass")) + len(self.area)


def from_wire(text: str, areas: dict[int, bytes]) -> BinaryValue | None:
    """The value a message's ``{"$":"Blobs",...}`` text names, with its area taken from
    `areas` (None: not such a text, or its area is not among them)."""
    match = _WIRE.match(text)
    if match is None or not text.endswith("}"):
        return None
    area = areas.pop(int(match.group(1)), None)
    if area is None:
        return None
    return BinaryValue(text[match.end() : -1], area)


def wire_text(value: BinaryValue) -> tuple[str, int]:
    """`value` as a message carries it to JS, and the attachment id its area goes under."""
    at = next(_ids)
    return f'{WIRE_PREFIX}{at},"v":{value}}}', at


def store_form(value: str | None) -> str | bytes | None:
    """What a store writes for a value: its text, or for a binary value one BLOB (a NUL,
    the text, a NUL, the area)."""
    if type(value) is BinaryValue:
        return b"".join((_STORED_MARK, value.encode("utf-8", "surrogatepass"), b"\0", value.area))
    return value


def store_bytes(value: str | None) -> bytes | None:
    """What a store whose value columns hold bytes only (PostgreSQL's BYTEA) writes: the
    text's UTF-8 (lone surrogates kept, as JS strings may hold them), or a binary value's
    BLOB as :func:`store_form` makes it. :func:`load_form` reads both."""
    if value is None:
        return None
    stored = store_form(value)
    return stored if isinstance(stored, bytes) else stored.encode("utf-8", "surrogatepass")


def load_form(stored: str | bytes | memoryview | None) -> str | None:
    """A value as a store read it (see :func:`store_form`)."""
    if stored is None or isinstance(stored, str):
        return stored
    data = bytes(stored)
    if not data.startswith(_STORED_MARK):
        return data.decode("utf-8", "surrogatepass")
    end = data.index(b"\0", 1)
    return BinaryValue(data[1:end].decode("utf-8", "surrogatepass"), data[end + 1 :])


def as_base64_text(value: BinaryValue) -> str:
    """The same value in the serializer's base64 form (``"v"`` nodes): for an isolate whose
    bridge carries text only, and for readers that want one JSON text."""
    area = value.area

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        blob = node.get("blob")
        if "$" in node and isinstance(blob, list) and len(blob) == 2:
            start, length = blob
            data = area[start : start + length]
            return {"$": node["$"], "v": pybase64.b64encode(data).decode("ascii")}
        return {key: convert(item) for key, item in node.items()}

    return orjson.dumps(convert(orjson.loads(str(value)))).decode()


def text_of(value: str) -> str:
    """Any stored value as one JSON text (a binary value in its base64 form)."""
    return as_base64_text(value) if type(value) is BinaryValue else value


class BlobsText(str):
    """JSON text holding binary values in their message form (a journal): `values` maps
    each attachment id in it to its value, whose area goes with the message."""

    values: dict[int, BinaryValue]

    def __new__(cls, text: str, values: dict[int, BinaryValue]) -> BlobsText:
        out = super().__new__(cls, text)
        out.values = values
        return out


def wire_member(value: BinaryValue) -> BlobsText:
    """`value` in its message form, as text that carries it."""
    text, at = wire_text(value)
    return BlobsText(text, {at: value})


def join_texts(separator: str, parts: list[str]) -> str:
    """`separator.join(parts)`, keeping the binary values the parts carry."""
    joined = separator.join(parts)
    values: dict[int, BinaryValue] = {}
    for part in parts:
        if type(part) is BlobsText:
            values.update(part.values)
    return BlobsText(joined, values) if values else joined


def concat(*parts: str) -> str:
    """`"".join(parts)`, keeping the binary values the parts carry."""
    return join_texts("", list(parts))


def text_only(text: str) -> str:
    """JSON text carrying binary values (a :class:`BlobsText`) with each in its base64 form
    instead, for a bridge that carries text only."""
    if type(text) is not BlobsText:
        return text
    out = str(text)
    for at, value in text.values.items():
        out = out.replace(f'{WIRE_PREFIX}{at},"v":{value}}}', as_base64_text(value), 1)
    return out
