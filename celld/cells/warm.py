"""Warm isolates: finished runs hand their isolate to the next run instead of freeing it.

Creating an isolate means parsing the whole runtime and the Worker bundle (about 12 ms
for a small project here), while a run on a warm isolate starts with one message.
Reusing an isolate across instances is what workerd does too: module-level state of
the Worker is shared by everything the isolate runs. An isolate that hit a limit is
never reused.
"""

from __future__ import annotations

from collections import deque

from celld.isolate.isolate import Isolate


class WarmIsolates:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._idle: deque[Isolate] = deque()

    def __len__(self) -> int:
        return len(self._idle)

    def take(self) -> Isolate | None:
        while self._idle:
            isolate = self._idle.popleft()
            if isolate.fault is None:
                return isolate
        return None

    def give(self, isolate: Isolate) -> Isolate | None:
        """Keep `isolate` for reuse; returns the one to close instead (if any)."""
        if isolate.fault is not None:
            return isolate
        self._idle.append(isolate)
        if len(self._idle) > self.capacity:
            return self._idle.popleft()
        return None

    def surplus(self, keep: int) -> list[Isolate]:
        """Take out every idle isolate beyond the `keep` most recently used."""
        out: list[Isolate] = []
        while len(self._idle) > keep:
            out.append(self._idle.popleft())
        return out

    def drain(self) -> list[Isolate]:
        idle, self._idle = list(self._idle), deque()
        return idle
