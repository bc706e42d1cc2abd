"""Retry delays. docs/semantics.md fixes the formula; production publishes none.

``n`` is the number of failed attempts so far (1 after the first failure), ``d`` the base:
constant ``d``, linear ``d*n``, exponential ``d*2**(n-1)``. No jitter. Delays are capped at
365 days (the longest sleep) so that a 10,000-retry exponential step keeps ``wake_at`` an
ordinary 64-bit integer for the store; no real configuration reaches the cap.
"""

from __future__ import annotations

from typing import Literal

from .durations import YEAR_MS

Backoff = Literal["constant", "linear", "exponential"]
BACKOFFS: tuple[str, ...] = ("constant", "linear", "exponential")
MAX_RETRY_DELAY_MS = YEAR_MS


def retry_delay_ms(backoff: str, base_ms: int, failed_attempts: int) -> int:
    """Delay before the next attempt after ``failed_attempts`` failures."""
    n = max(1, failed_attempts)
    if base_ms <= 0:
        return 0
    if backoff == "linear":
        delay = base_ms * n
    elif backoff == "exponential":
        # 2**(n-1) overflows nothing in Python, but compare before multiplying huge numbers
        if n - 1 >= 64:
            return MAX_RETRY_DELAY_MS
        delay = base_ms * (1 << (n - 1))
    else:
        delay = base_ms
    return min(delay, MAX_RETRY_DELAY_MS)
