"""Where runs get their isolates: a warm one a finished run left behind, or a new one.

A faulted isolate (a limit hit, a broken bridge) is closed, never kept warm.
"""

from __future__ import annotations

from celld.cells.warm import WarmIsolates
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.program import Program
from celld.isolate.threads import JsThreadPool
from celld.store.base import InstanceRef


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
    def __init__(self, threads: JsThreadPool, program: Program, limits: Limits) -> None:
        self.threads = threads
        self.program = program
        self.limits = limits
        self.warm = WarmIsolates(capacity=4 * len(threads.threads))

    async def take(self) -> tuple[Isolate, bool]:
        """(isolate, fresh): a fresh one has the Worker loaded but no env yet."""
        isolate = self.warm.take()
        if isolate is not None:
            return isolate, False
        isolate = Isolate(self.threads.pick(), self.limits)
        try:
            await isolate.load([self.program.script])
        except BaseException:
            await isolate.close()
            raise
        return isolate, True

    async def give(self, isolate: Isolate) -> None:
        surplus = self.warm.give(isolate)
        if surplus is not None:
            await surplus.close()

    async def close(self) -> None:
        for isolate in self.warm.drain():
            await isolate.close()
