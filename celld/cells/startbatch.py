"""Runs admitted together start together: one JS turn per isolate, one store transaction.

The residency admits queued runs in passes (celld/cells/residency.py `dispatch`): a
createBatch's instances, or a burst of hibernated wake-ups due at one moment, are
admitted dozens at a time. Each run's start has awaits of its own (its load, the commit
of what a dead process left, a place in an isolate, its journal), and they end at
different moments; a run that posted its `wf.start` as soon as it could would cost its
isolate a turn of its own (a loop crossing, the turn's fixed cost, its end's
bookkeeping) and a commit of its own for its start and first step.

A `StartBatch` is the runs of one admission pass. Each run, once it is ready to post
its start, waits here (`ready`) until every run of the batch is ready too or gave up
(`leave`: no run came of it, or its start failed). Then all of them post in the same
pass of the event loop, so the runs sharing an isolate are started by one turn, and
the start commits they hold until that turn's end (celld/cells/cell.py `start_run`)
are released together and go to the store as one share of its group commit. Nothing
of the output gate changes: each run's writes are told to the gate as before, and a
message waits for every write told before it.

A batch never waits for long: the wait ends `MAX_WAIT_S` after the first run was ready
even if others are not (a run whose isolate is still being created, say); the late ones
then start on their own. Failure stays per run: a run whose code throws at its start
ends alone (its `wf.done` is its own message), and a run that condemns the isolate
costs its co-tenants a replay elsewhere, as for runs that joined one by one.

Counters (`StartCounts`, exported as metrics): batches, the runs started in them and
the JS turns that delivered their starts, so the turns per batch can be checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from celld.isolate.tenant import Tenant

#: The longest a ready run waits for the rest of its batch (seconds of loop time).
MAX_WAIT_S = 0.05


class StartCounts:
    """How runs were started: batches, runs, and the JS turns that delivered the starts."""

    __slots__ = ("batches", "runs", "turns")

    def __init__(self) -> None:
        self.batches = 0
        self.runs = 0
        self.turns = 0


class StartBatch:
    """The runs of one admission pass (see the module's docstring)."""

    __slots__ = (
        "_members", "_opened", "_timer", "_posted", "_counts", "_counted", "_turns_counted",
        "_launches",
    )  # fmt: skip

    def __init__(self, members: list[Hashable], counts: StartCounts) -> None:
        #: members that have neither posted their start nor left
        self._members: set[Hashable] = set(members)
        self._opened: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: the turns that deliver the starts posted: (isolate host, batch number)
        self._posted: set[tuple[int, int]] = set()
        self._counts = counts
        self._counted = False
        self._turns_counted = 0
        #: the starts of members that are ready, posted together when the batch opens
        self._launches: dict[Hashable, Callable[[], None]] = {}

    async def ready(self, member: Hashable, launch: Callable[[], None]) -> None:
        """`member` is ready to post its start: `launch` posts it, called with every other
        member's in one go once the batch opens (all in one pass, before any turn can
        deliver some of them and not the others). Returns once it was called."""
        self._members.discard(member)
        self._launches[member] = launch
        if not self._members or self._opened_now():
            self._open()
            return
        loop = asyncio.get_running_loop()
        if self._opened is None:
            self._opened = loop.create_future()
            self._timer = loop.call_later(MAX_WAIT_S, self._open)
        await asyncio.shield(self._opened)

    def _opened_now(self) -> bool:
        return self._opened is not None and self._opened.done()

    def withdraw(self, member: Hashable) -> None:
        """`member`'s start was given up while it waited (its task cancelled): its launch
        is never called, and the others need not wait for it."""
        self._launches.pop(member, None)
        self.leave(member)

    def leave(self, member: Hashable) -> None:
        """`member` will not post a start (or posted it already): the others need not wait
        for it."""
        if member in self._members:
            self._members.discard(member)
            if not self._members:
                self._open()

    def posted(self, tenant: Tenant) -> None:
        """A member posted its start to `tenant`'s isolate: count the turn delivering it."""
        host = tenant.host
        self._posted.add((id(host), tenant.wanted))
        self._count()

    def _count(self) -> None:
        counts = self._counts
        if not self._counted:
            self._counted = True
            counts.batches += 1
        counts.runs += 1
        counts.turns = counts.turns - self._turns_counted + len(self._posted)
        self._turns_counted = len(self._posted)

    def _open(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._opened is None:
            self._opened = asyncio.get_running_loop().create_future()
        launches, self._launches = self._launches, {}
        for launch in launches.values():
            launch()  # (each catches its own errors: they belong to its start)
        if not self._opened.done():
            self._opened.set_result(None)
