"""The behaviours a Worker's compatibility date and flags choose, decided in one place.

workerd turns a behaviour on from its enable date, or earlier with its enable flag, and off
again with its disable flag (the disable flag wins over both). Every date-gated behaviour
celld follows is a row of `BEHAVIOURS`; the host reads `behaviours()` when it resolves the
project (a queue body's default type, how a single-page app answers) and the JS runtime
reads the same outcome (celld.isolate.compat), so no date is compared anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Behaviour:
    """One date-gated behaviour: its name in the outcome and workerd's switches."""

    name: str
    enable_flag: str
    disable_flag: str
    enable_date: str


#: Every date-gated behaviour celld follows.
BEHAVIOURS: tuple[Behaviour, ...] = (
    # WebSocket binaryType starts at "blob" and binary messages arrive as Blob (the
    # standard's default); before, "arraybuffer".
    Behaviour(
        "websocketBlob",
        "websocket_standard_binary_type",
        "no_websocket_standard_binary_type",
        "2026-03-17",
    ),
    # A queue message sent without `contentType` is JSON; before, "v8" (structured clone).
    Behaviour(
        "queuesJsonMessages", "queues_json_messages", "no_queues_json_messages", "2024-03-18"
    ),
    # With `not_found_handling = "single-page-application"`, a request no asset matches
    # gets index.html only when it is a browser navigation (`Sec-Fetch-Mode: navigate`);
    # the rest reach the Worker. Before, every such request got index.html.
    Behaviour(
        "assetsNavigationPrefersAssetServing",
        "assets_navigation_prefers_asset_serving",
        "assets_navigation_has_no_effect",
        "2025-04-01",
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
