"""Python's cyclic garbage collector, settled for serving: the start-up heap frozen.

A full (generation 2) pass of the collector walks every container object the process
holds, on whichever thread allocated when it fell due, holding the GIL throughout: the
event loop stands still for the whole pass, and so does every request in flight. A
served `celld run` holds ~67,000 such objects from start-up alone (modules, classes,
functions, the project's configuration, Starlette's routes), which live as long as the
process and are never garbage. While 1,000 10-step workflow instances ran, a full pass
walked 86,000-120,000 objects and took 26-63 ms of the loop thread's CPU on this
project's 2-core bench machine, twice per 10,000 steps: the longest stall of the loop by
far, and the p99 of a plain request sent meanwhile (bench/PROFILE.md, "What holds the
event loop while 1,000 run").

So once the server listens (`freeze_start_up_heap`), one collection clears start-up's
garbage and `gc.freeze()` moves every object still alive into the permanent generation,
which passes do not walk: a full pass under the same load then walks 21,000-38,000
objects, 5-9 ms. Garbage made after start-up, cycles included, is collected as before;
what was frozen is never freed, which for start-up's objects is what would have happened
anyway. The generations' thresholds stay Python's: with less to walk, a full pass falls
due as often as before (a quarter of the walked heap new since the last one) and costs
what the heap grown since start-up costs.

`pauses` keeps the longest pass of each generation and the passes' count and total, for
the operator's metrics.
"""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)  # (found in gc.callbacks by identity)
class Pauses:
    """The collector's passes since `watch` (per generation 0, 1, 2)."""

    count: list[int] = field(default_factory=lambda: [0, 0, 0])
    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    longest: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    _began: dict[int, float] = field(default_factory=dict)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """gc.callbacks' hook: time each pass on the thread that ran it."""
        thread = threading.get_ident()
        if phase == "start":
            self._began[thread] = time.perf_counter()
            return
        began = self._began.pop(thread, None)
        if began is None:  # (watched from the middle of a pass)
            return
        took = time.perf_counter() - began
        generation = info["generation"]
        self.count[generation] += 1
        self.seconds[generation] += took
        self.longest[generation] = max(self.longest[generation], took)


pauses = Pauses()


def watch() -> None:
    """Time the collector's passes in `pauses` (once per process)."""
    if pauses not in gc.callbacks:
        gc.callbacks.append(pauses)


def freeze_start_up_heap() -> int:
    """Collect start-up's garbage, then freeze what is alive: later passes do not walk it.
    The number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
