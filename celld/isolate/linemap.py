"""Joining scripts into one source and mapping stack positions back to files.

The binding names every evaluated source `<input>`, so a stack trace alone cannot
say which file a frame is in. Evaluating the runtime and the Worker bundle as one
joined source gives every line a unique number; this map turns `<input>:L:C`
back into the real file, line and column.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: A locator maps a (line, column) inside one script to (file, line, column).
Locator = Callable[[int, int], "tuple[str, int, int] | None"]

# A QuickJS stack position; matching it is parsing the binding's own output
# format, not user source.
_POSITION = re.compile(r"<input>:(\d+)(?::(\d+))?")


@dataclass(frozen=True)
class Segment:
    name: str
    first_line: int  # 1-based line of the joined source where this script starts
    locate: Locator | None = None


@dataclass(frozen=True)
class LineMap:
    segments: tuple[Segment, ...]
    _starts: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", tuple(s.first_line for s in self.segments))

    def locate(self, line: int, column: int) -> tuple[str, int, int]:
        index = bisect.bisect_right(self._starts, line) - 1
        segment = self.segments[max(index, 0)]
        local_line = line - segment.first_line + 1
        if segment.locate is not None:
            found = segment.locate(local_line, column)
            if found is not None:
                return found
        return (segment.name, local_line, column)

    def rewrite(self, text: str) -> str:
        """Replace every `<input>:L:C` in a stack or message with its real position."""

        def replace(match: re.Match[str]) -> str:
            line = int(match.group(1))
            column = int(match.group(2) or 0)
            name, real_line, real_column = self.locate(line, column)
            return f"{name}:{real_line}:{real_column}" if match.group(2) else f"{name}:{real_line}"

        return _POSITION.sub(replace, text)


def join_scripts(parts: Sequence[tuple[str, str, Locator | None]]) -> tuple[str, LineMap]:
    """Join (name, source, locator) parts into one source with a map of where each starts."""
    chunks: list[str] = []
    segments: list[Segment] = []
    line = 1
    for name, source, locator in parts:
        text = source if source.endswith("\n") else source + "\n"
        segments.append(Segment(name, line, locator))
        chunks.append(text)
        line += text.count("\n")
    return "".join(chunks), LineMap(tuple(segments))
