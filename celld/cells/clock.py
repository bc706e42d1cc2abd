"""The engine's clock, injectable so tests can run day-long sleeps at once.

Every deadline the engine keeps (sleeps, retry delays, event timeouts, step
timeouts, alarms) is measured on this clock. `ManualClock` only moves when told
to, and wakes every sleeper whose deadline it passes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol


class Cancellable(Protocol):
    def cancel(self) -> Any: ...


class Clock(Protocol):
    def now(self) -> int:
        """Epoch milliseconds."""
        ...

    async def sleep_until(self, when_ms: int) -> None: ...

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Call `callback` on the event loop at `when_ms`; cheaper than a task that sleeps."""
        ...


class SystemClock:
    def now(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_until(self, when_ms: int) -> None:
        delay = (when_ms - self.now()) / 1000
        if delay > 0:
            await asyncio.sleep(delay)

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> Cancellable:
        delay = max(0.0, (when_ms - self.now()) / 1000)
        return asyncio.get_running_loop().call_later(delay, callback)


class ManualClock:
    """A clock that stands still until `advance` or `set` moves it."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = start_ms if start_ms is not None else time.time_ns() // 1_000_000
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> int:
        return self._now

    async def sleep_until(self, when_ms: int) -> None:
        if when_ms <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (when_ms, next(self._order), future))
        await future

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> Cancellable:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: None if f.cancelled() else callback())
        if when_ms <= self._now:
            future.set_result(None)
        else:
            heapq.heappush(self._sleepers, (when_ms, next(self._order), future))
        return future

    def set(self, now_ms: int) -> None:
        self._now = max(self._now, now_ms)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def advance(self, ms: int) -> None:
        self.set(self._now + ms)
