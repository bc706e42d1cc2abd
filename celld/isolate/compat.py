"""The runtime's side of a Worker's compatibility date and flags.

celld.project.compat decides every date-gated behaviour; the JS runtime reads the outcome
as `globalThis.__celld_compat`, set by the script this module writes ahead of the runtime
files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from celld.isolate.runtime import Script
from celld.project.compat import behaviours

__all__ = ["behaviours", "compat_script"]


def compat_script(compatibility_date: str | None, flags: Iterable[str]) -> Script:
    """The script that hands the runtime what `behaviours` decided."""
    chosen = json.dumps(behaviours(compatibility_date, flags), sort_keys=True)
    source = (
        'Object.defineProperty(globalThis, "__celld_compat", '
        f"{{ value: Object.freeze({chosen}), configurable: true }});\n"
    )
    return Script("celld compatibility", source)
