"""Residency: the one owner of which instances are in memory and which hold an isolate.

Rules:

* One cell per instance in memory at any time (`cells`); a cell is loaded while an
  operation uses it, a commit of it is in flight or it has a run, and unloaded as soon as
  none of these holds (it hibernates: rows in the store only).
* An instance being created is not loadable until its creation is committed or refused:
  a load of it waits, so a create can never race a second cell into existence.
* A run needs an isolate slot; slots are capped (`max_resident`). Beyond the cap the least
  recently used *parked* run (resident but only waiting) hibernates to free its slot.
* Runs are admitted at the pace they settle: at most `max_young` runs may be *young*
  (started, not yet parked or over, for less than `YOUNG_MS`) at once. A burst of
  thousands of new instances then runs a few dozen at a time, each taking the warm
  isolate the previous one left (a run of a few turns costs about a millisecond; a new
  isolate costs ten), instead of hundreds at once each creating an isolate. A run that
  stays busy longer than `YOUNG_MS` stops counting, so a long step never holds others up.
* Runs waiting for a slot are references in a bounded :class:`RunQueue`; a cell is loaded
  only when its run gets a slot. The one exception: a cell just created stays in memory
  while its first run is queued (a few KiB each, at most as many as the queue holds), so
  that run does not read back from the store what the create just wrote.
* A cell whose memory can no longer be trusted (a failed commit) is forgotten at once; the
  next load reads the instance from the store.
* With a store several nodes share, only instances this node owns load (the store
  decides); a run of one owned elsewhere is dropped here, as its owner runs it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from typing import Any

from celld.cells.cell import Cell
from celld.cells.runqueue import Priority, RunQueue
from celld.cells.startbatch import StartBatch, StartCounts
from celld.store.base import InstanceRef, OwnedElsewhere, StoreUnavailable

Loader = Callable[[InstanceRef], Awaitable[Cell | None]]
Starter = Callable[[Cell, Priority], Awaitable[None]]
Spawner = Callable[[Coroutine[Any, Any, Any], str], None]

#: How long a started run counts against `max_young` at most (wall time, from the end of
#: its start: loading, isolate and start commit).
YOUNG_MS = 500
_LAUNCHING = float("inf")  # a young run whose start is still under way


class Residency:
    def __init__(
        self,
        load: Loader,
        start: Starter,
        spawn: Spawner,
        on_unavailable: Callable[[InstanceRef], None],
        *,
        max_resident: int,
        queue_capacity: int,
        max_young: int = 64,
    ) -> None:
        self._load_from_store = load
        self._start_cell = start
        self._spawn = spawn
        self._on_unavailable = on_unavailable
        self.max_resident = max_resident
        self.queue = RunQueue(queue_capacity)
        self.cells: dict[InstanceRef, Cell] = {}
        self._loading: dict[InstanceRef, asyncio.Future[Cell | None]] = {}
        self._creating: dict[InstanceRef, asyncio.Event] = {}
        self._slots: OrderedDict[InstanceRef, Cell] = OrderedDict()  # LRU first
        self._reserved = 0  # slots given to runs whose cell is still loading
        self.max_young = max_young
        #: runs admitted and not yet parked or over: ref -> monotonic start (oldest first)
        self._young: dict[InstanceRef, float] = {}
        self._young_timer: asyncio.TimerHandle | None = None
        #: no young run comes of age before this (monotonic s): a lower bound, since runs
        #: start later than the earliest and leaving only raises it, so a burst's every
        #: dispatch does not walk the young runs again (it did, ~20 us an instance)
        self._young_next = 0.0
        self._launching = 0  # young runs whose start is under way
        #: starts popped from the queue and not over yet (`start_pending`)
        self._starts: dict[InstanceRef, Priority] = {}
        self._held: dict[InstanceRef, Cell] = {}  # created cells waiting for their first run
        #: Idle warm isolates: runs beyond `max_young` are admitted while they have one.
        self.warm_idle: Callable[[], int] = lambda: 0
        #: Runs that could join a running or warm isolate now (a batch's size at most).
        self.start_room: Callable[[], int] = lambda: 0
        self.runs_started = 0
        #: how runs were started together (celld/cells/startbatch.py), for metrics
        self.start_counts = StartCounts()
        self._dispatch_handle: asyncio.Handle | None = None
        #: Called whenever the queue has room again (the manager refills it from the store).
        self.on_room: Callable[[], None] = lambda: None

    @property
    def resident_count(self) -> int:
        return len(self._slots) + self._reserved

    def get(self, ref: InstanceRef) -> Cell | None:
        return self.cells.get(ref)

    def resident_cells(self) -> list[Cell]:
        return list(self._slots.values())

    # -- loading -------------------------------------------------------------------------

    @asynccontextmanager
    async def using(self, ref: InstanceRef) -> AsyncIterator[Cell | None]:
        """Hold the instance's cell loaded for the duration of an operation."""
        cell = await self.load(ref)
        if cell is None:
            yield None
            return
        cell.users += 1
        try:
            yield cell
        finally:
            cell.users -= 1
            self.release(cell)

    async def load(self, ref: InstanceRef) -> Cell | None:
        while True:
            creating = self._creating.get(ref)
            if creating is not None:
                await creating.wait()
                continue
            cell = self.cells.get(ref)
            if cell is not None:
                return cell
            pending = self._loading.get(ref)
            if pending is not None:
                await asyncio.shield(pending)
                continue
            return await self._load(ref)

    async def _load(self, ref: InstanceRef) -> Cell | None:
        future: asyncio.Future[Cell | None] = asyncio.get_running_loop().create_future()
        self._loading[ref] = future
        try:
            cell = await self._load_from_store(ref)
            if cell is not None:
                self.cells[ref] = cell
            future.set_result(cell)
            return cell
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: only the loader reports it
            raise
        finally:
            del self._loading[ref]

    # -- creating ------------------------------------------------------------------------

    @asynccontextmanager
    async def creating(self, refs: Iterable[InstanceRef]) -> AsyncIterator[set[InstanceRef]]:
        """Claim ids for creation. Yields the refs that may be created (no cell of them is
        in memory and no other create of them is in flight); loads of those wait until the
        block ends. The store still judges uniqueness against what is on disk."""
        claimed: set[InstanceRef] = set()
        for ref in refs:
            while ref in self._loading:
                await asyncio.shield(self._loading[ref])
            if ref in self.cells or ref in self._creating:
                continue
            self._creating[ref] = asyncio.Event()
            claimed.add(ref)
        try:
            yield claimed
        finally:
            for ref in claimed:
                self._creating.pop(ref).set()

    def start_pending(self, ref: InstanceRef) -> bool:
        """A start of `ref` is queued as a wake-up or under way, and its run does not
        exist yet: that start settles every deadline due by the time it starts the run
        (`Machine.start_run` takes the clock then; a preload's quiet start too, see
        `Cell.start_run`), so an alarm for a deadline already due has nothing to add.
        A start that ends without a run arms the deadline again (`start_over`)."""
        cell = self.cells.get(ref)
        if cell is not None and cell.run is not None:
            return False  # resident: its alarms reach the run
        return ref in self._starts or self.queue.priority(ref) is Priority.WAKE

    def start_over(self, ref: InstanceRef) -> None:
        """The start of `ref` is over (with or without a run): no longer pending."""
        self._starts.pop(ref, None)

    def busy(self, ref: InstanceRef) -> bool:
        """`ref` is being created or loaded: its cell is about to be in memory."""
        return ref in self._creating or ref in self._loading

    def add(self, cell: Cell) -> None:
        """A created cell, committed: it is the instance's cell from now on."""
        self.cells[cell.ref] = cell

    # -- releasing -------------------------------------------------------------------------

    def release(self, cell: Cell) -> None:
        """Free the cell's slot if its run is over, unload it if nothing holds it, and let
        queued runs take freed or parked slots."""
        if cell.run is not None and not cell.parked:
            return  # a busy run (every step's commit): nothing to free, settle or hand on
        freed = False
        if self._slots.get(cell.ref) is cell and cell.run is None and not cell.starting:
            del self._slots[cell.ref]
            freed = True
        if cell.idle and self.cells.get(cell.ref) is cell:
            del self.cells[cell.ref]
        settled = (
            cell.ref in self._young
            and self._young[cell.ref] != _LAUNCHING
            and ((cell.run is None and not cell.starting) or cell.parked)
        )
        if settled:
            del self._young[cell.ref]
        if freed or settled or (len(self.queue) and cell.parked):
            self.dispatch()

    def forget(self, cell: Cell) -> None:
        """Drop a broken cell now: the next load reads the instance from the store."""
        if self._held.get(cell.ref) is cell:
            del self._held[cell.ref]
            cell.users -= 1
        if self.cells.get(cell.ref) is cell:
            del self.cells[cell.ref]
        self._young.pop(cell.ref, None)
        if self._slots.get(cell.ref) is cell:
            del self._slots[cell.ref]
            self.dispatch()

    def touch(self, cell: Cell) -> None:
        if cell.ref in self._slots:
            self._slots.move_to_end(cell.ref)

    # -- the run queue and slots -------------------------------------------------------------

    def request_run(
        self, ref: InstanceRef, priority: Priority, *, hold: Cell | None = None
    ) -> None:
        """Queue a run of `ref`. `hold`: its cell, just created; it stays loaded until the
        run starts (if the queue took the run and not too many are held already)."""
        if hold is None:
            # loaded now (an event or an operation brought it in): kept loaded until its
            # run starts, since the dispatch comes at the end of this pass
            hold = self.cells.get(ref)
        queued = self.queue.push(ref, priority)
        if (
            hold is not None
            and queued
            and len(self._held) < self.queue.capacity
            and ref not in self._held
        ):
            self._held[ref] = hold
            hold.users += 1
        self.dispatch()

    def _unhold(self, ref: InstanceRef) -> None:
        cell = self._held.pop(ref, None)
        if cell is not None:
            cell.users -= 1
            self.release(cell)

    def dispatch(self) -> None:
        """Admit queued runs at the end of this pass of the event loop: the runs requested
        or freed during one pass (a createBatch's instances, a burst of due wake-ups, the
        runs a group commit settled) are admitted together and start as one batch
        (celld/cells/startbatch.py)."""
        if self._dispatch_handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._dispatch_now()
            return
        self._dispatch_handle = loop.call_soon(self._dispatch_due)

    def _dispatch_due(self) -> None:
        self._dispatch_handle = None
        self._dispatch_now()

    def _dispatch_now(self) -> None:
        admitted: list[tuple[InstanceRef, Priority, Cell | None]] = []
        while len(self.queue):
            if (
                len(self._young) >= self.max_young
                and self.warm_idle() <= self._launching
                and not self._age_young()
            ):
                break
            if self.resident_count >= self.max_resident and not self._evict_one():
                break
            item = self.queue.pop()
            if item is None:
                break
            ref, priority = item
            cell = self.cells.get(ref)
            if cell is not None and (cell.run is not None or cell.starting):
                self._unhold(ref)
                continue  # running already; what it needs reaches the run
            if cell is not None:
                # Loaded now (an event or an operation brought it in): keep it loaded
                # until its run starts, rather than reading the instance again.
                cell.users += 1
            self._reserved += 1
            self.runs_started += 1
            self._young[ref] = _LAUNCHING
            self._launching += 1
            self._starts[ref] = priority
            admitted.append((ref, priority, cell))
        # Runs that find room in a running or warm isolate start together; those beyond
        # it would wait for an isolate to be created (milliseconds of a JS thread each,
        # one per thread at a time) and start on their own rather than hold the batch.
        together = min(len(admitted), self.start_room()) if len(admitted) > 1 else 0
        batch = (
            StartBatch([ref for ref, _, _ in admitted[:together]], self.start_counts)
            if together > 1
            else None
        )
        for i, (ref, priority, cell) in enumerate(admitted):
            self._spawn(
                self._start(ref, priority, cell, batch if i < together else None),
                "starting a run",
            )
        if self.queue.has_room:
            self.on_room()  # a refill from the store waits for room

    def _age_young(self) -> bool:
        """Stop counting runs started `YOUNG_MS` ago or more (their start, isolate
        included, is over); True if any stopped. Otherwise look again when the next one
        comes of age."""
        now = time.monotonic()
        if now < self._young_next:
            # None can be of age yet. The timer that called this may have been armed for
            # an earlier bound, or fired a hair early: make sure one is armed for this one.
            self._look_again_at(self._young_next, now)
            return False
        limit = YOUNG_MS / 1000
        aged = [ref for ref, started in self._young.items() if now - started >= limit]
        for ref in aged:
            del self._young[ref]
        if not aged:
            earliest = min(self._young.values())
            if earliest != _LAUNCHING:
                self._young_next = earliest + limit
                self._look_again_at(self._young_next, now)
        return bool(aged)

    def _look_again_at(self, when: float, now: float) -> None:
        """Dispatch again at `when` (monotonic seconds), unless a timer is armed already:
        one that fires sooner calls `_age_young`, which arms the next."""
        if self._young_timer is None:
            loop = asyncio.get_running_loop()
            self._young_timer = loop.call_later(max(0.0, when - now), self._young_due)

    def _young_due(self) -> None:
        self._young_timer = None
        self.dispatch()

    def _evict_one(self) -> bool:
        for ref, cell in self._slots.items():
            if cell.parked:
                del self._slots[ref]
                cell.evict()
                return True
        return False

    async def _start(
        self, ref: InstanceRef, priority: Priority, held: Cell | None, batch: StartBatch | None
    ) -> None:
        reserved = True
        started: Cell | None = None
        try:
            async with self.using(ref) as cell:
                self._unhold(ref)
                if cell is None or cell.run is not None or cell.starting or cell.broken:
                    return
                self._reserved -= 1
                reserved = False
                cell.starting = True
                self._slots[ref] = cell
                started = cell
                cell.start_batch = batch
                await self._start_cell(cell, priority)
        except StoreUnavailable:
            self._on_unavailable(ref)  # its run is requested again once the store works
        except OwnedElsewhere:
            pass  # another node took the instance over: it runs there
        finally:
            if started is not None and started.start_batch is batch:
                started.start_batch = None
            if batch is not None:
                batch.leave(ref)  # (its start posted, or never will: the others go on)
            self._starts.pop(ref, None)
            self._launching -= 1
            if held is not None:
                held.users -= 1
                self.release(held)
            if reserved:
                self._reserved -= 1
            cell = self.cells.get(ref)
            if cell is None or (cell.run is None and not cell.starting) or cell.parked:
                self._young.pop(ref, None)  # no run came of it, or it settled already
            elif ref in self._young:
                self._young[ref] = time.monotonic()  # started: it comes of age from now
            self.dispatch()  # a freed slot, or (at the cap) the timer for coming of age
