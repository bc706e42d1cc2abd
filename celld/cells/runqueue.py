"""Runs waiting for an isolate slot: references only, bounded, backed by the store.

A queued run is an `InstanceRef`, never a loaded machine: the cell is loaded when the
run gets its slot. The queue holds at most `capacity` runs for new instances and
preloads; past that a run is left out and the queue notes that it overflowed. Nothing
is lost by leaving a run out: an instance that needs a run is marked runnable in the
store when it is committed, and the manager refills the queue from the store's
runnable index, page by page, once it has room (startup is the same case: everything
runnable on disk is "left out" until it is paged in). Wake-ups (alarms, events,
resumes, recoveries) are never left out; there are at most as many as alarms held.

Order: wake-ups first, then new instances, then preloads, each in arrival order, as
Cloudflare runs wake-ups before new instances.
"""

from __future__ import annotations

import heapq
import itertools
from enum import IntEnum

from celld.store.base import InstanceRef


class Priority(IntEnum):
    WAKE = 0
    NEW = 1
    PRELOAD = 2  # bring a waiting instance in before its deadline: after everything else


class RunQueue:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._heap: list[tuple[int, int, InstanceRef]] = []
        self._queued: dict[InstanceRef, Priority] = {}
        self._order = itertools.count()
        self._bounded = 0  # queued runs that count against capacity
        #: Runs were left out since the last full refill: the store holds them.
        self.overflowed = False

    def __len__(self) -> int:
        return len(self._queued)

    def __contains__(self, ref: object) -> bool:
        return ref in self._queued

    @property
    def has_room(self) -> bool:
        return self._bounded < self.capacity

    def priority(self, ref: InstanceRef) -> Priority | None:
        """The priority `ref` is queued with (None: not queued)."""
        return self._queued.get(ref)

    def push(self, ref: InstanceRef, priority: Priority) -> bool:
        """Queue a run; False if it was left out (the queue is full for its priority)."""
        current = self._queued.get(ref)
        if current is not None and current <= priority:
            return True
        if priority is not Priority.WAKE and current is None and not self.has_room:
            self.overflowed = True
            return False
        if current is not None and current is not Priority.WAKE:
            self._bounded -= 1
        self._queued[ref] = priority
        if priority is not Priority.WAKE:
            self._bounded += 1
        heapq.heappush(self._heap, (priority, next(self._order), ref))
        return True

    def pop(self) -> tuple[InstanceRef, Priority] | None:
        while self._heap:
            priority, _, ref = heapq.heappop(self._heap)
            if self._queued.get(ref) != priority:
                continue  # superseded by a higher priority entry
            del self._queued[ref]
            if priority is not Priority.WAKE:
                self._bounded -= 1
            return ref, Priority(priority)
        return None

    def discard(self, ref: InstanceRef) -> None:
        priority = self._queued.pop(ref, None)
        if priority is not None and priority is not Priority.WAKE:
            self._bounded -= 1
