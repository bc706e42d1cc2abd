"""A small JSONC reader (JSON plus ``//`` and ``/* */`` comments and trailing commas).

Why not json5: wrangler reads ``wrangler.json``/``wrangler.jsonc`` with a JSONC parser, and
json5 accepts much more (unquoted keys, single quotes, NaN, hex numbers). A config celld
accepts must also be one ``wrangler dev`` accepts. Blanking comments and trailing commas with
spaces keeps every character in place, so ``json`` reports exact line and column numbers.
"""

from __future__ import annotations

import json
from typing import Any


class JSONCError(ValueError):
    """A syntax error with a 1-based position."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.msg = message
        self.line = line
        self.column = column


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def strip_jsonc(text: str) -> str:
    """Return ``text`` with comments and trailing commas replaced by spaces (same length)."""
    out = list(text)
    i, n = 0, len(text)
    in_string = False
    pending_comma = -1  # index of a comma that is trailing if the next token closes a container
    last_token = ""  # last significant character outside comments
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        if ch == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            if end < 0:
                raise JSONCError("unterminated /* comment", *_position(text, i))
            for j in range(i, end + 2):
                if text[j] != "\n":
                    out[j] = " "
            i = end + 2
            continue
        if ch.isspace():
            i += 1
            continue
        if ch in "NI":
            # Outside strings JSON has no upper-case letters; this catches NaN and Infinity,
            # which Python's json module would otherwise accept.
            raise JSONCError("NaN and Infinity are not valid JSON", *_position(text, i))
        if ch in "]}" and pending_comma >= 0:
            out[pending_comma] = " "
        pending_comma = i if ch == "," and last_token not in ("", ",", ":", "[", "{") else -1
        if ch == '"':
            in_string = True
        last_token = ch
        i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """Parse JSONC text; raises :class:`JSONCError` with the position of the first error."""
    if text.startswith("\ufeff"):
        text = text[1:]
    cleaned = strip_jsonc(text)
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise JSONCError(exc.msg, exc.lineno, exc.colno) from None
