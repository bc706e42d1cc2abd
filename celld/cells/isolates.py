"""Where runs get their isolates: a shared one already running others, a warm one the
last run of an isolate left behind, or a new one.

Many runs share an isolate (`join`), as workerd runs many instances of a Workflow class
in one isolate: a run is a promise chain there (celld/isolate/tenant.py), so a running
instance costs kilobytes instead of an isolate, and joining or leaving a busy isolate is
one message. A run joins the most recent isolate of its kind with room (`MAX_TENANTS`);
only when none has room does it take a warm isolate or create one. An isolate goes back
to the warm pool (with its audit of the built-ins, celld/isolate/host.py `detach`) once
its last run leaves. Runs that must have an isolate to themselves (their turns go on a JS
thread, or an earlier fault could not be pinned on one run) never share.

A faulted isolate (a limit hit, a broken bridge) is closed, never kept warm.

Creating an isolate loads the runtime and the Worker (a few ms of a JS thread even from
bytecode, and the memory of a whole context), while a warm one starts a run with one
message. So at most one isolate is created per JS thread at a time: a run that finds no
warm isolate while those are being created waits for whichever comes first, an isolate a
finished run gives back or its turn to create one. In a burst of short runs (createBatch
of instances that run to a sleep) the runs then pass a few dozen isolates along instead
of creating one each, and the turns of running isolates are never queued behind a pile
of creations on their thread.

The warm pool holds one isolate per JS thread when quiet (a burst's runs share running
ones); those idle for `WARM_IDLE_S` beyond that are closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from celld.cells.warm import WarmIsolates
from celld.isolate.host import IsolateHost, OpHandler
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.program import Program
from celld.isolate.tenant import Tenant
from celld.isolate.threads import JsThreadPool
from celld.store.base import InstanceRef
from celld.store.lease import EffectFence

log = logging.getLogger("celld.cells")

#: Warm isolates idle this long (beyond the quiet few) are closed.
WARM_IDLE_S = 300.0
#: Runs one isolate serves at once at most: bounds what one fault costs (a replay of each
#: co-tenant), how much one turn may carry and how long a run's step messages wait at the
#: output gate behind its co-tenants' uncommitted results (rule 3 of celld/isolate/gate.py:
#: with 32, the 50 runs of bench/step_cost.py committed 0.64 times a step, with 8 0.16).
MAX_TENANTS = 8


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


def _runtime_fault(message: dict[str, Any]) -> None:
    """The runtime could not handle a message it was sent (js/host.js): it names the
    message's kind, not a run (the isolate serves several)."""
    shape = message.get("error") or {}
    log.error(
        "workflow isolate: runtime error in %s: %s: %s",
        message.get("kind"),
        shape.get("name"),
        shape.get("message"),
    )


def _fence_key(fence: EffectFence | None) -> object:
    """Runs share an isolate only under the same fence (the node's lease as of their load):
    the isolate's gate and pump obey one."""
    if fence is None:
        return None
    lease, epoch = getattr(fence, "lease", None), getattr(fence, "epoch", None)
    return fence if lease is None else (id(lease), epoch)


class IsolateSource:
    def __init__(
        self, threads: JsThreadPool, program: Program, limits: Limits, *, burst: int = 0
    ) -> None:
        self.threads = threads
        self.program = program
        self.limits = limits
        #: isolates kept warm when quiet
        self.quiet_capacity = len(threads.threads)
        #: (`burst` is no longer needed: a burst's runs share running isolates)
        self.warm = WarmIsolates(capacity=self.quiet_capacity)
        #: isolates serving runs that others may join, most recently opened last
        self._shared: list[tuple[IsolateHost, object]] = []
        #: an isolate being opened for shared runs, by fence key: others wait for it
        self._opening: dict[object, asyncio.Future[None]] = {}
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

    async def join(
        self,
        ops: Mapping[str, OpHandler],
        fence: EffectFence | None,
        hello: Callable[[bool], dict[str, Any]],
        *,
        inline: bool,
        shared: bool,
    ) -> Tenant:
        """A place for a run: in a shared isolate with room (`shared` and `inline` only),
        else in a warm or new one, opened with `hello(fresh)` (the env of a fresh isolate,
        a reset of a warm one) before any run's message."""
        key = _fence_key(fence)
        shared = shared and inline
        while shared:
            for host, host_key in reversed(self._shared):
                if (
                    host_key == key
                    and len(host.tenants) < MAX_TENANTS
                    and not host.faulted
                    and not host.draining
                ):
                    return host.add_tenant()
            opening = self._opening.get(key)
            if opening is None:
                break
            # another run is opening an isolate these runs can share: wait for it
            await asyncio.shield(opening)
        done: asyncio.Future[None] | None = None
        if shared:
            done = asyncio.get_running_loop().create_future()
            self._opening[key] = done
        try:
            isolate, fresh = await self.take()
            isolate.inline = inline
            host = IsolateHost(isolate, {**ops, "fault": _runtime_fault})
            host.fence = fence
            host.post(hello(fresh))
            if shared:
                self._shared.append((host, key))
            return host.add_tenant()
        finally:
            if done is not None:
                del self._opening[key]
                done.set_result(None)

    async def leave(self, tenant: Tenant, *, quiet: bool = True) -> None:
        """The run is over in this isolate (`quiet`: its run() ended or it only waits, see
        `IsolateHost.remove_tenant`); the isolate goes back once its last run left."""
        host = tenant.host
        host.remove_tenant(tenant, quiet=quiet)
        if host.tenants:
            return
        self._shared = [(h, k) for h, k in self._shared if h is not host]
        await self.give(await host.detach())

    def _free_places(self) -> int:
        """Runs that could still join the isolates serving shared runs now."""
        return sum(MAX_TENANTS - len(host.tenants) for host, _ in self._shared if not host.faulted)

    def room(self) -> int:
        """Runs that could start now without creating an isolate."""
        return len(self.warm) + self._free_places()

    def start_room(self) -> int:
        """Runs that could join a running or warm isolate now (a warm one takes
        `MAX_TENANTS`): how many runs admitted together may start as one batch."""
        return len(self.warm) * MAX_TENANTS + self._free_places()

    @property
    def serving(self) -> int:
        """Isolates serving shared runs now."""
        return len(self._shared)

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
