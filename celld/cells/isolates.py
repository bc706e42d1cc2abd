"""Where runs get their isolates: a warm one a finished run left behind, or a new one.

A faulted isolate (a limit hit, a broken bridge) is closed, never kept warm.
"""

from __future__ import annotations

from celld.cells.warm import WarmIsolates
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.program import Program
from celld.isolate.threads import JsThreadPool


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
