"""Whether the store is committing, and since when it is not.

The cells never turn a store failure into a workflow failure: they drop what they held
in memory and wait here until the store commits again. One object per store keeps the
answer (for the cells, the log and /cdn-cgi/celld/metrics) and lets every waiter share a
single probe instead of each retrying on its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("celld.store")

FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 5.0
REPORT_EVERY_S = 10.0


class StoreHealth:
    def __init__(self) -> None:
        #: wall-clock epoch ms of the first failure of the current outage, None when healthy
        self.failing_since: int | None = None
        self.last_error: str | None = None
        self.failures = 0  # failed commits, all time (for metrics)
        self.outages = 0
        self._recovered: asyncio.Event | None = None
        self._probing = False

    @property
    def healthy(self) -> bool:
        return self.failing_since is None

    def record_failure(self, error: BaseException) -> None:
        self.failures += 1
        self.last_error = f"{type(error).__name__}: {error}"
        if self.failing_since is None:
            self.failing_since = time.time_ns() // 1_000_000
            self.outages += 1
            log.error("the store is failing: %s (writes are retried; nothing is lost)", error)

    def record_success(self) -> None:
        if self.failing_since is None:
            return
        seconds = (time.time_ns() // 1_000_000 - self.failing_since) / 1000
        log.warning("the store commits again after %.1f s of failures", seconds)
        self.failing_since = None
        if self._recovered is not None:
            self._recovered.set()
            self._recovered = None

    async def wait_healthy(self, probe: Callable[[], Awaitable[None]]) -> None:
        """Return once the store commits again. One caller probes (a real tiny write) with
        a growing backoff; the others wait for its verdict."""
        while self.failing_since is not None:
            if self._probing:
                if self._recovered is None:
                    self._recovered = asyncio.Event()
                await self._recovered.wait()
                continue
            self._probing = True
            try:
                await self._probe_until_healthy(probe)
            finally:
                self._probing = False
                # Healthy, or this prober was cancelled: either way the others look again
                # (one of them probes on if the store still fails).
                if self._recovered is not None:
                    self._recovered.set()
                    self._recovered = None

    async def _probe_until_healthy(self, probe: Callable[[], Awaitable[None]]) -> None:
        delay = FIRST_BACKOFF_S
        last_report = time.monotonic()
        while self.failing_since is not None:
            await asyncio.sleep(delay)
            delay = min(MAX_BACKOFF_S, delay * 2)
            if time.monotonic() - last_report >= REPORT_EVERY_S and self.failing_since:
                last_report = time.monotonic()
                seconds = (time.time_ns() // 1_000_000 - self.failing_since) / 1000
                log.error(
                    "the store has been failing for %.0f s (%s); workflows wait for it",
                    seconds,
                    self.last_error,
                )
            try:
                await probe()  # records success or failure itself
            except Exception as error:  # noqa: BLE001 - a failed probe means: wait longer
                log.debug("store probe failed: %s", error)
