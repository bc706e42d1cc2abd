"""Warm isolates: finished runs hand their isolate to the next run instead of freeing it.

Creating an isolate means parsing the whole runtime and the Worker bundle (about 12 ms
for a small project here), while a run on a warm isolate starts with one message.
Reusing an isolate across instances is what workerd does too: module-level state of
the Worker is shared by everything the isolate runs. An isolate that hit a limit is
never reused.

The most recently given isolate is taken first, so in quiet times the same few serve
and the rest sit idle; `surplus` hands back those idle for long (their memory goes back
once the burst that needed them is long over).
"""

from __future__ import annotations

import time
from collections import deque

from celld.isolate.isolate import Isolate


class WarmIsolates:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._idle: deque[tuple[Isolate, float]] = deque()  # (isolate, given at), oldest first

    def __len__(self) -> int:
        return len(self._idle)

    def take(self) -> Isolate | None:
        while self._idle:
            isolate, _ = self._idle.pop()
            if isolate.fault is None:
                return isolate
        return None

    def give(self, isolate: Isolate) -> Isolate | None:
        """Keep `isolate` for reuse; returns the one to close instead (if any)."""
        if isolate.fault is not None:
            return isolate
        self._idle.append((isolate, time.monotonic()))
        if len(self._idle) > self.capacity:
            return self._idle.popleft()[0]
        return None

    def surplus(self, keep: int, idle_s: float) -> list[Isolate]:
        """Take out the isolates beyond the `keep` most recently used that have been idle
        for `idle_s` seconds or more."""
        out: list[Isolate] = []
        limit = time.monotonic() - idle_s
        while len(self._idle) > keep and self._idle[0][1] <= limit:
            out.append(self._idle.popleft()[0])
        return out

    def drain(self) -> list[Isolate]:
        idle, self._idle = [isolate for isolate, _ in self._idle], deque()
        return idle
