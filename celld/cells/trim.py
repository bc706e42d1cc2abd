"""Give freed memory back to the operating system after bursts of activity.

A burst (thousands of instances created, run up to their first sleep, then
hibernated) leaves glibc's malloc holding the freed memory in its arenas, so the
process keeps its peak RSS although almost nothing is live. `malloc_trim` returns
it; on other C libraries this is a no-op.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("celld.cells")

TRIM_INTERVAL_S = 3.0


def _load_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


_TRIM = _load_trim()


async def trim_after_bursts(
    is_quiet: Callable[[], bool],
    activity: Callable[[], int],
    release: Callable[[], Awaitable[int]] | None = None,
) -> None:
    """Every few seconds of wall time, while all is quiet: `release` what bursts kept
    for a while (warm isolates idle for long; it returns how many it freed), and once
    runs have happened or something was released, trim, and trim once more on the next
    quiet look (isolates of the burst's last runs are still being freed when it first
    looks quiet). `activity` grows with every run."""
    if _TRIM is None and release is None:
        return
    seen = activity()
    owed = 0
    while True:
        await asyncio.sleep(TRIM_INTERVAL_S)
        current = activity()
        if current != seen:
            seen = current
            owed = 2
        if not is_quiet():
            continue
        if release is not None and await release():
            owed = 2
        if owed and _TRIM is not None:
            await asyncio.get_running_loop().run_in_executor(None, _TRIM, 0)
        owed = max(0, owed - 1)
