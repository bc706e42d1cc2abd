"""Alarms: wake an instance when its next deadline comes.

Only deadlines inside the residency window are held in memory; the rest stay in
the store, found through its index on each instance's next wake time and
brought in by a scan that runs every half window. Restarting celld therefore
loads nothing but the alarms of the next window.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable

from celld.cells.clock import Clock
from celld.store.base import InstanceRef

log = logging.getLogger("celld.alarms")


class AlarmQueue:
    """A min-heap of (deadline, instance) with one task that fires them in order."""

    def __init__(self, clock: Clock, fire: Callable[[InstanceRef, int], None]) -> None:
        self.clock = clock
        self._fire = fire
        self._heap: list[tuple[int, int, InstanceRef]] = []
        self._when: dict[InstanceRef, int] = {}
        self._order = itertools.count()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.lags_ms: list[int] = []  # how late recent alarms fired (for metrics)
        self.fired = 0

    def __len__(self) -> int:
        return len(self._when)

    def schedule(self, ref: InstanceRef, when_ms: int) -> None:
        """Set (or move) the alarm of `ref`; the earlier of two alarms is not kept."""
        if self._when.get(ref) == when_ms:
            return
        self._when[ref] = when_ms
        heapq.heappush(self._heap, (when_ms, next(self._order), ref))
        if self._heap[0][2] is ref or self._heap[0][0] == when_ms:
            self._changed.set()

    def cancel(self, ref: InstanceRef) -> None:
        self._when.pop(ref, None)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._task.add_done_callback(self._stopped)

    def _stopped(self, task: asyncio.Task[None]) -> None:
        """The firing loop never ends on its own: if it failed, log why and start it again
        (alarms are in the heap and the store, so none is lost)."""
        if task.cancelled() or task is not self._task:
            return
        log.error("the alarm loop failed; restarting it", exc_info=task.exception())
        self.start()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            self._drop_cancelled()
            if not self._heap:
                self._changed.clear()
                await self._changed.wait()
                continue
            when = self._heap[0][0]
            if when > self.clock.now():
                self._changed.clear()
                sleeper = asyncio.ensure_future(self.clock.sleep_until(when))
                changed = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
                sleeper.cancel()
                changed.cancel()
                continue
            _, _, ref = heapq.heappop(self._heap)
            if self._when.get(ref) != when:
                continue
            del self._when[ref]
            self.fired += 1
            self.lags_ms.append(max(0, self.clock.now() - when))
            if len(self.lags_ms) > 100_000:
                del self.lags_ms[:50_000]
            try:
                self._fire(ref, when)  # must not block: it schedules the wake-up
            except Exception:  # noqa: BLE001 - one instance's failure must not stop alarms
                log.exception("alarm for %s/%s failed", ref.workflow, ref.id)

    def _drop_cancelled(self) -> None:
        while self._heap and self._when.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
