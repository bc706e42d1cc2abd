"""Where runs get their isolates: a warm one a finished run left behind, or a new one.

A faulted isolate (a limit hit, a broken bridge) is closed, never kept warm.

Creating an isolate loads the runtime and the Worker (a few ms of a JS thread even from
bytecode, and the memory of a whole context), while a warm one starts a run with one
message. So at most one isolate is created per JS thread at a time: a run that finds no
warm isolate while those are being created waits for whichever comes first, an isolate a
finished run gives back or its turn to create one. In a burst of short runs (createBatch
of instances that run to a sleep) the runs then pass a few dozen isolates along instead
of creating one each, and the turns of running isolates are never queued behind a pile
of creations on their thread.

The warm pool holds as many isolates as runs may be young at once (see
celld.cells.residency), so that in a burst every run finds the isolate an earlier one
left; those idle for `WARM_IDLE_S` beyond a few per JS thread are closed (about 0.6 MiB
each: a burst's pool of 64 is some 40 MiB, kept a while for the next burst, such as
the wake-up of the instances the last one created).
"""

from __future__ import annotations

import asyncio
from collections import deque

from celld.cells.warm import WarmIsolates
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.program import Program
from celld.isolate.threads import JsThreadPool
from celld.store.base import InstanceRef

#: Warm isolates idle this long (beyond the quiet few) are closed.
WARM_IDLE_S = 300.0


class LongTurns:
    """Instances one of whose turns ran too long for the event loop: their runs go on JS
    threads. Kept in memory (a restart gives each one more inline try) and bounded: past
    `capacity` the oldest entries are forgotten, which costs them one stopped turn."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._refs: dict[InstanceRef, None] = {}

    def __contains__(self, ref: InstanceRef) -> bool:
        return ref in self._refs

    def add(self, ref: InstanceRef) -> None:
        self._refs[ref] = None
        while len(self._refs) > self.capacity:
            del self._refs[next(iter(self._refs))]


class IsolateSource:
    def __init__(
        self, threads: JsThreadPool, program: Program, limits: Limits, *, burst: int = 0
    ) -> None:
        self.threads = threads
        self.program = program
        self.limits = limits
        #: isolates kept warm when quiet
        self.quiet_capacity = 4 * len(threads.threads)
        self.warm = WarmIsolates(capacity=max(burst, self.quiet_capacity))
        self.max_creating = len(threads.threads)
        self._creating = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.created = 0  # isolates created, ever (for metrics and benchmarks)

    async def take(self) -> tuple[Isolate, bool]:
        """(isolate, fresh): a fresh one has the Worker loaded but no env yet."""
        while True:
            isolate = self.warm.take()
            if isolate is not None:
                return isolate, False
            if self._creating < self.max_creating:
                break
            await self._wait()
        self._creating += 1
        try:
            isolate = Isolate(self.threads.pick(), self.limits)
            try:
                await isolate.load([self.program.script])
            except BaseException:
                await isolate.close()
                raise
        finally:
            self._creating -= 1
            self._wake_one()
        self.created += 1
        return isolate, True

    async def _wait(self) -> None:
        """Until an isolate is given back or a creation ends (FIFO among waiters)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake_one()  # it was woken: pass the wake-up on
            raise

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def give(self, isolate: Isolate) -> None:
        surplus = self.warm.give(isolate)
        self._wake_one()
        if surplus is not None:
            await surplus.close()

    async def shrink(self) -> int:
        """Close warm isolates idle for long beyond the quiet capacity; returns how many."""
        surplus = self.warm.surplus(self.quiet_capacity, WARM_IDLE_S)
        for isolate in surplus:
            await isolate.close()
        return len(surplus)

    async def close(self) -> None:
        for isolate in self.warm.drain():
            await isolate.close()
