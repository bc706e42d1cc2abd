"""Inline turns share the event loop by the slice, not by the callback.

An inline turn (celld/isolate/isolate.py) runs JS on the event-loop thread. Were each run
straight from the coroutine that wants it, a thousand busy instances would put a thousand
turns, and the work each one sets off, into every pass of the loop: a pass would take
tens of milliseconds, and an HTTP request, whose handling crosses the loop several times,
would wait for several such passes.

So inline turns are queued here and run by one callback that stops after `BUDGET_S` of
turns and schedules itself again: the loop polls its sockets and runs everything else
between two slices. Turns run in the order they were asked for, and a run that needs
another turn queues behind the others, so the busy instances take turns fairly. What
the slices add up to is what the loop can spare; the JS work is the same.

A group commit's continuations (each run told its write landed: celld/store/batch.py
`fan_out`) go through the slices too, ahead of the turns (`call_first`): told all in the
callback that brought the commit back, a hundred runs' continuations held the loop for
1-5 ms, a pass any request in flight had to wait out.

A request a client is waiting on goes first: from its headers to its task's start
(celld/server/protocol.py) and while its Worker turn runs on a JS thread
(IsolateHost.prompt), a slice due to start waits (`hold`) for it, up to `HOLD_S` from when
it was due. Meanwhile the loop runs only its other callbacks and then sleeps in its poll,
so the request's task starts in a short pass and the JS thread gets the GIL at once
instead of after a switch interval or a whole inline turn (a direct call into QuickJS
holds the GIL until it returns). No slice waits longer than `HOLD_S`, and the waits add
up to at most `HOLD_SHARE` of the time (a credit that refills at that rate): a stream of
requests, or a CPU-bound one, gets its fair share of the loop and no more, so busy HTTP
clients cannot starve the workflows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

T = TypeVar("T")

log = logging.getLogger("celld.isolate")

#: Turns run back to back for at most this long before the loop gets a pass of its own.
BUDGET_S = 0.001
#: A slice due waits at most this long for the requests in flight (see `hold`) ...
HOLD_S = 0.002
#: ... and slices wait, all told, for at most this share of the time (with a credit of
#: `HOLD_CREDIT_S` to spend in a burst).
HOLD_SHARE = 0.1
HOLD_CREDIT_S = 0.005


class InlineTurns:
    """The queue of inline turns of one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: deque[tuple[Callable[[], Any], asyncio.Future[Any] | None]] = deque()
        self._first: deque[Callable[[], Any]] = deque()  # see `call_first`
        self._scheduled = False
        self._holds = 0
        self._waiting: asyncio.TimerHandle | None = None  # a slice waiting for them
        self._due_at: float | None = None  # when the waiting slice was first due
        self._wait_until = 0.0  # and until when it may wait
        self._credit = HOLD_CREDIT_S  # seconds slices may still wait (see HOLD_SHARE)
        self._credited_at = time.perf_counter()

    def __len__(self) -> int:
        return len(self._queue) + len(self._first)

    @property
    def held(self) -> int:
        """Requests in flight that slices wait for (see `hold`)."""
        return self._holds

    def call(self, turn: Callable[[], Any]) -> None:
        """Run `turn` (which reports its own outcome) on this thread in the next slice:
        what an isolate's host pumps with, without a future or a task per turn."""
        self._queue.append((turn, None))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._slice)

    def call_first(self, work: Callable[[], Any]) -> None:
        """Run `work` (which reports its own outcome) in the next slice, before every turn
        queued by `call` and after what was queued by `call_first` before it: a commit's
        continuations (celld/store/batch.py `fan_out`), which ran in the callback that
        told of the commit, ahead of any slice, keep that order while they share the
        slices' budget."""
        self._first.append(work)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._slice)

    async def run(self, turn: Callable[[], T]) -> T:
        """Run `turn` on this thread in the next slice; its result or exception."""
        future: asyncio.Future[T] = self._loop.create_future()
        self._queue.append((turn, future))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._slice)
        return await future

    def hold(self) -> None:
        """Work a client waits on is in flight: slices due meanwhile wait for `release`
        (each at most `HOLD_S`)."""
        self._holds += 1

    def release(self) -> None:
        """A turn announced by `hold` has ended: a slice waiting for it runs now."""
        self._holds -= 1
        if self._holds == 0 and self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
            self._loop.call_soon(self._slice)

    def _slice(self) -> None:
        self._waiting = None
        now = time.perf_counter()
        if self._holds or self._due_at is not None:
            if self._due_at is None:
                self._credit = min(
                    HOLD_CREDIT_S, self._credit + (now - self._credited_at) * HOLD_SHARE
                )
                self._credited_at = now
                self._due_at = now
                self._wait_until = now + min(HOLD_S, self._credit)
            if self._holds and now < self._wait_until:
                self._waiting = self._loop.call_later(self._wait_until - now, self._slice)
                return
            self._credit -= now - self._due_at
            self._due_at = None
        self._scheduled = False
        queue, first = self._queue, self._first
        end = time.perf_counter() + BUDGET_S
        while first or queue:
            if first:
                work = first.popleft()
                try:
                    work()
                except Exception:  # noqa: BLE001 - one broken turn must not stop the others
                    log.exception("an inline turn failed")
                if time.perf_counter() >= end:
                    break
                continue
            turn, future = queue.popleft()
            if future is None:
                try:
                    turn()
                except Exception:  # noqa: BLE001 - one broken turn must not stop the others
                    log.exception("an inline turn failed")
            elif future.done():  # its awaiter was cancelled: the turn is not wanted
                continue
            else:
                try:
                    future.set_result(turn())
                except Exception as error:  # noqa: BLE001 - handed to the awaiting pump
                    future.set_exception(error)
            if time.perf_counter() >= end:
                break
        if (first or queue) and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._slice)


_by_loop: WeakKeyDictionary[asyncio.AbstractEventLoop, InlineTurns] = WeakKeyDictionary()


def inline_turns() -> InlineTurns:
    """The inline-turn queue of the running event loop."""
    loop = asyncio.get_running_loop()
    turns = _by_loop.get(loop)
    if turns is None:
        turns = _by_loop[loop] = InlineTurns(loop)
    return turns
