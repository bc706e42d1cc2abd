"""Threads that own QuickJS contexts.

A QuickJS runtime must only ever be touched from the thread that created it (the
binding crashes otherwise), and the binding releases the GIL while JS runs. So each
JS thread is a single-worker executor: every context lives on exactly one of them,
and contexts on different threads run JS in parallel.

The thread takes plain callables off a `queue.SimpleQueue` rather than being a
`ThreadPoolExecutor` of one worker: an executor's `submit` builds a Future, its Condition
and a work item and checks its worker count on every call (~10 us of the event loop's time
for each turn handed over, and as much again on the JS thread to settle the Future), and
the turns that a client waits on (`run_then`) and the batched ones (`run_batched`) need no
Future at all. `submit` and `run` still give one when a caller wants it.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("celld.isolate")

#: The JS threads not yet shut down (weakly: a dropped one is not kept alive for exit).
_LIVE: weakref.WeakSet[JsThread] = weakref.WeakSet()


def _at_exit() -> None:
    """Let every JS thread finish what it was given before the interpreter frees what
    its contexts hold, as an executor's worker would."""
    for thread in list(_LIVE):
        thread.shutdown()


# Called before the interpreter joins its threads at exit (what concurrent.futures uses for
# its executors' workers); `atexit` runs later, after that join. The hook is CPython's own
# and private: where it is missing, `atexit` still runs before the interpreter is torn
# down (JS threads are daemons, so they are still alive to finish then).
_register_at_exit = getattr(threading, "_register_atexit", None)
if callable(_register_at_exit):
    _register_at_exit(_at_exit)
else:
    atexit.register(_at_exit)

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
        self._batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self._flush_scheduled = False
        #: what the thread runs next, in order; None tells it to stop
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._closed = False
        old = threading.stack_size()
        threading.stack_size(THREAD_STACK_BYTES)
        try:
            # Started now, while the larger stack size is in force.
            self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
            self._thread.start()
        finally:
            threading.stack_size(old)
        _LIVE.add(self)

    def _serve(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # a job's own call is caught by the job: this is the hand-back
                log.exception("JS thread %s: a job failed to hand its outcome back", self.name)

    def _put(self, job: Callable[[], None]) -> None:
        if self._closed:
            raise RuntimeError(f"JS thread {self.name} is shut down")
        self._jobs.put(job)

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn()
            except BaseException as error:  # noqa: BLE001 - handed to the future's owner
                future.set_exception(error)
            else:
                future.set_result(result)

        self._put(job)
        return future

    def run_then(
        self,
        fn: Callable[[], T],
        then: Callable[[T | None, BaseException | None], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """Run `fn` on this thread now (no waiting for the end of the loop's pass, as
        `run_batched` does) and call `then(value, error)` on `loop` when it is done: one
        crossing each way, no future and no task between them. For the turns a client is
        waiting on (Worker requests)."""
        self._put(lambda: self._run_then(fn, then, loop))

    @staticmethod
    def _run_then(
        fn: Callable[[], T],
        then: Callable[[T | None, BaseException | None], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        try:
            value, error = fn(), None
        except BaseException as failure:  # noqa: BLE001 - handed to `then` on the loop
            value, error = None, failure
        loop.call_soon_threadsafe(then, value, error)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on this thread and await its result from the event loop."""
        return await asyncio.wrap_future(self.submit(fn))

    async def run_batched(self, fn: Callable[[], T]) -> T:
        """Like `run`, but calls queued in the same event-loop pass share one trip to the
        thread and one wake-up back: with many isolates on a thread, each turn otherwise
        pays an executor hand-off and a loop wake-up of its own."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._batch.append((fn, future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush, loop)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._batch = self._batch, []
        self._flush_scheduled = False
        self._put(lambda: self._run_batch(batch, loop))

    @staticmethod
    def _run_batch(
        batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        for fn, future in batch:
            try:
                outcomes.append((future, fn(), None))
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting caller
                outcomes.append((future, None, error))
        loop.call_soon_threadsafe(JsThread._settle, outcomes)

    @staticmethod
    def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
        for future, value, error in outcomes:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

    def shutdown(self) -> None:
        """Stop taking work; return once everything given so far has run."""
        if not self._closed:
            self._closed = True
            self._jobs.put(None)
            _LIVE.discard(self)
        if self._thread is not threading.current_thread():
            self._thread.join()


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
