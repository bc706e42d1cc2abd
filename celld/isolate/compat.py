"""The runtime behaviours a Worker's compatibility date and flags choose, decided once.

workerd turns a behaviour on from its enable date, or earlier with its enable flag, and off
again with its disable flag (the flag wins over the date). The JS runtime reads the outcome
as `globalThis.__celld_compat`, set by the script this module writes ahead of the runtime
files, so a behaviour is decided here and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from celld.isolate.runtime import Script


@dataclass(frozen=True)
class Behaviour:
    """One date-gated behaviour: its name in `__celld_compat` and workerd's switches."""

    name: str
    enable_flag: str
    disable_flag: str
    enable_date: str


#: The behaviours the JS runtime asks about.
BEHAVIOURS: tuple[Behaviour, ...] = (
    # WebSocket binaryType starts at "blob" and binary messages arrive as Blob (the
    # standard's default); before, "arraybuffer".
    Behaviour(
        "websocketBlob",
        "websocket_standard_binary_type",
        "no_websocket_standard_binary_type",
        "2026-03-17",
    ),
)


def behaviours(compatibility_date: str | None, flags: Iterable[str]) -> dict[str, bool]:
    """Which behaviours are on for a Worker with this date and these flags (no date: the
    oldest behaviour, as for a date before every enable date)."""
    given = set(flags)
    out: dict[str, bool] = {}
    for b in BEHAVIOURS:
        if b.disable_flag in given:
            out[b.name] = False
        elif b.enable_flag in given:
            out[b.name] = True
        else:
            out[b.name] = (compatibility_date or "") >= b.enable_date
    return out


def compat_script(compatibility_date: str | None, flags: Iterable[str]) -> Script:
    """The script that hands the runtime what `behaviours` decided."""
    chosen = json.dumps(behaviours(compatibility_date, flags), sort_keys=True)
    source = (
        'Object.defineProperty(globalThis, "__celld_compat", '
        f"{{ value: Object.freeze({chosen}), configurable: true }});\n"
    )
    return Script("celld compatibility", source)
