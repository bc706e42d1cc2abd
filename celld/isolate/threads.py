"""Threads that own QuickJS contexts.

A QuickJS runtime must only ever be touched from the thread that created it (the
binding crashes otherwise), and the binding releases the GIL while JS runs. So each
JS thread is a single-worker executor: every context lives on exactly one of them,
and contexts on different threads run JS in parallel.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

#: C stack for JS threads: deep recursion in user code needs more than the default,
#: and QuickJS's own stack limit (set per context) must fit inside it.
THREAD_STACK_BYTES = 16 * 1024 * 1024
#: QuickJS's stack limit, kept well under the thread's C stack.
JS_STACK_LIMIT_BYTES = 8 * 1024 * 1024


class JsThread:
    """One OS thread that runs every call for the contexts it owns."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.load = 0  # contexts placed on this thread; used to spread new ones
        old = threading.stack_size()
        threading.stack_size(THREAD_STACK_BYTES)
        try:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
            # Start the worker now, while the larger stack size is in force.
            self._executor.submit(lambda: None).result()
        finally:
            threading.stack_size(old)

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        return self._executor.submit(fn)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on this thread and await its result from the event loop."""
        return await asyncio.wrap_future(self._executor.submit(fn))

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=False)


class JsThreadPool:
    """A fixed set of JS threads, one per core by default."""

    def __init__(self, size: int | None = None, name: str = "celld-js") -> None:
        count = size or os.cpu_count() or 1
        self.threads = [JsThread(f"{name}-{i}") for i in range(count)]
        self._round_robin = itertools.cycle(self.threads)

    def pick(self) -> JsThread:
        """The least loaded thread (ties broken round-robin)."""
        lowest = min(thread.load for thread in self.threads)
        for thread in self._round_robin:
            if thread.load == lowest:
                return thread
        raise AssertionError("unreachable")

    def shutdown(self) -> None:
        for thread in self.threads:
            thread.shutdown()
