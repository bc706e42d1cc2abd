"""The cell manager: assembles residency, the run queue, alarms and the store, and is the
port every cell talks to (:class:`celld.cells.port.CellPort`).

* Residency (:mod:`celld.cells.residency`) decides which instances are in memory and which
  hold an isolate; the manager supplies how to load a cell and how to start its run.
* Alarms for deadlines inside the residency window are held in memory; a scan of the
  store's wake index every half window brings in the next ones.
* The run queue is bounded; what it leaves out, and everything runnable at startup, is
  paged in from the store's runnable index as the queue drains.
* A store failure never fails an instance: the cells that hit it are forgotten and their
  instances loaded again once the store commits (the store's health probe says when).
* With a store several nodes share, a cell is loaded only on the node that owns its
  instance (`Store.claim`); the store tells the manager what this node took over from nodes
  that died (:meth:`instances_claimed`) and hands it operations other nodes received for
  its instances (:meth:`run_forwarded`). An instance owned elsewhere is never loaded here:
  reads of it are views of its committed rows (:meth:`view`).
* The node's lease (celld/store/lease.py): every cell takes a fence of it when loaded, and
  its runs neither start a JS turn nor send a message while the fence says no. When the
  node rejoins under a new token, every cell loaded under the old one is dropped at once
  (another node may have moved its instance on) and reloaded from the store, and a load
  or a create that straddled the rejoin keeps no cell (:meth:`_rejoined`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from celld.cells.alarms import AlarmQueue
from celld.cells.cell import Cell
from celld.cells.clock import Clock
from celld.cells.instance_log import LogHub
from celld.cells.introspection import Introspection
from celld.cells.isolates import IsolateSource, LongTurns
from celld.cells.port import RunSettings, WorkflowSpec
from celld.cells.residency import Residency
from celld.cells.runqueue import Priority
from celld.cells.schedules import Scheduler
from celld.cells.startbatch import StartCounts
from celld.cells.tasks import ErrorHandler, TaskOwner
from celld.cells.trim import trim_after_bursts
from celld.engine import Machine, Status, rollback
from celld.engine.decisions import JournalText
from celld.isolate.host import OpHandler
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.program import Program
from celld.isolate.tenant import Tenant
from celld.isolate.threads import JsThreadPool
from celld.store.base import (
    Claimed,
    InstanceRef,
    Loaded,
    OwnedElsewhere,
    Store,
    StoreUnavailable,
    Write,
)
from celld.store.lease import EffectFence, Lease

__all__ = ["CellManager", "CellSettings", "WorkflowSpec"]

log = logging.getLogger("celld.cells")

DEFAULT_RESIDENCY_MS = 3_600_000
SWEEP_INTERVAL_MS = 60_000
SCAN_PAGE = 5_000
#: Runs that may be young at once (celld.cells.residency): enough to keep the event loop
#: and the group commit busy while each run waits for its commits, and the isolates they
#: pass along (the warm pool holds as many) a few dozen MiB.
MAX_YOUNG = 64
REFILL_PAGE = 1_000
MAX_ALARMS_IN_MEMORY = 500_000
#: Every so often the horizon scan reads every deadline in the window again, not only
#: those past the previous scan's horizon: a safety net that costs one pass of the index.
FULL_SCAN_MS = 60_000
#: Deadlines kept to preload at the next scan when no slot was free (at most this many).
PRELOAD_LATER_MAX = 10_000


#: What operator views show instead of a `sensitive: "output"` step's value.
SENSITIVE_VALUE = '"[REDACTED]"'


def _sensitive(config: str | None) -> bool:
    if not config or "sensitive" not in config:
        return False
    try:
        return bool(json.loads(config).get("sensitive") == "output")
    except (ValueError, AttributeError):
        return False


def default_max_resident() -> int:
    """One resident isolate per 32 MiB of physical memory, within [64, 2048].

    A resident isolate costs about 0.5 to 1 MiB (runtime, Worker, run state), so the cap
    keeps them to a few percent of memory (24 GiB gives 768) while letting instances that
    wake soon stay resident instead of replaying.
    """
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 4 * 1024**3
    return max(64, min(2048, memory // (32 * 1024 * 1024)))


@dataclass
class CellSettings:
    residency_ms: int = DEFAULT_RESIDENCY_MS
    max_resident: int = 0  # 0: default_max_resident()
    replay_every_step: bool = False
    #: turns of workflow runs on the event-loop thread (CELLD_INLINE_TURNS=0: JS threads)
    inline_turns: bool = True
    queue_capacity: int = 0  # 0: 4 x max_resident, at least 1,000
    #: test mode: instances accept test modifiers (celld.cells.introspection)
    test_mode: bool = False

    @classmethod
    def from_environment(cls) -> CellSettings:
        """CELLD_ALARM_RESIDENT_MS, CELLD_MAX_RESIDENT, CELLD_REPLAY_EVERY_STEP,
        CELLD_INLINE_TURNS, CELLD_RUN_QUEUE; test mode with CELLD_TEST_MODE=1 or a manual test clock
        (CELLD_TEST_CLOCK=manual)."""
        env = os.environ
        return cls(
            residency_ms=int(env.get("CELLD_ALARM_RESIDENT_MS", DEFAULT_RESIDENCY_MS)),
            max_resident=int(env.get("CELLD_MAX_RESIDENT", 0)),
            replay_every_step=env.get("CELLD_REPLAY_EVERY_STEP", "") not in ("", "0", "false"),
            inline_turns=env.get("CELLD_INLINE_TURNS", "1") not in ("", "0", "false"),
            queue_capacity=int(env.get("CELLD_RUN_QUEUE", 0)),
            test_mode=env.get("CELLD_TEST_MODE", "") not in ("", "0", "false")
            or env.get("CELLD_TEST_CLOCK", "").startswith("manual"),
        )


class CellManager:
    def __init__(
        self,
        specs: Mapping[str, WorkflowSpec],
        store: Store,
        clock: Clock,
        threads: JsThreadPool,
        program: Program,
        ops: Mapping[str, OpHandler],
        env_message: dict[str, Any],
        *,
        limits: Limits | None = None,
        settings: CellSettings | None = None,
    ) -> None:
        from celld.cells.binding import WorkflowBindings  # the binding uses this module

        self.specs = dict(specs)
        #: the Worker bundle's hash: new instances record it (version pinning)
        self.version = program.version
        self.store = store
        self.clock = clock
        settings = settings or CellSettings()
        self.residency_ms = settings.residency_ms
        max_resident = settings.max_resident or default_max_resident()
        self.ops = dict(ops)
        self.ops["wf.binding"] = WorkflowBindings(self).handle
        #: test modifiers, in test mode only
        self.introspection = Introspection() if settings.test_mode else None
        self.settings = RunSettings(
            residency_ms=settings.residency_ms,
            replay_every_step=settings.replay_every_step,
            inline_turns=settings.inline_turns,
            env_message=env_message,
            ops=self.ops,
            lines=program.lines,
            introspection=self.introspection,
            lease=store.lease,
        )
        self.isolates = IsolateSource(threads, program, limits or Limits(), burst=MAX_YOUNG)
        self.long_turns = LongTurns()
        #: instances whose runs get an isolate of their own (see `runs_alone`)
        self.alone = LongTurns()
        self.tasks = TaskOwner("cells")
        self.residency = Residency(
            self._load_cell,
            self._start_cell,
            self._spawn_quiet,
            self._recover_later,
            max_resident=max_resident,
            queue_capacity=settings.queue_capacity or max(1_000, 4 * max_resident),
            max_young=MAX_YOUNG,
        )
        self.residency.on_room = self._refill_wanted
        self.residency.warm_idle = self.isolates.room
        self.residency.start_room = self.isolates.start_room
        self.alarms = AlarmQueue(clock, self._on_alarm)
        self._refill = asyncio.Event()
        self._refilling = False  # a refill pass is paging runnable instances in
        self._recovering: set[InstanceRef] = set()
        #: every deadline before this was read by a horizon scan (None: scan them all)
        self._scanned_to: int | None = None
        self._full_scan_at = 0
        self._preload_later: list[tuple[InstanceRef, int]] = []
        self._stopping = False
        self.log_hub = LogHub()  # subscribe(): wakes readers of an instance's event log
        self.scheduler = Scheduler(
            self.specs, store, clock, self._create_scheduled, self.tasks, self.version
        )
        self.lease.on_epoch(self._rejoined)

    @property
    def lease(self) -> Lease:
        return self.settings.lease

    # -- start and stop ------------------------------------------------------------------

    async def start(self) -> None:
        """Resume every unfinished instance: runnable ones are paged in from the store as
        slots free up, alarms of the next window are loaded."""
        self.alarms.start()
        self.residency.queue.overflowed = True  # everything runnable on disk needs a run
        self._refill.set()
        await self._scan_horizon()
        await self.store.serve(self)
        self.tasks.spawn(self._refill_loop(), "paging runnable instances in")
        self.tasks.spawn(self._horizon_loop(), "scanning for due instances")
        self.tasks.spawn(self._sweep_loop(), "deleting expired instances")
        self.tasks.spawn(
            trim_after_bursts(
                lambda: (
                    not len(self.residency.queue)
                    and self.residency.resident_count < self.residency.max_resident // 2
                ),
                lambda: self.residency.runs_started,
                self.isolates.shrink,
            ),
            "trimming memory after bursts",
        )
        await self.scheduler.start()

    async def stop(self) -> None:
        """Stop every run first (their isolates stop answering), then the background work;
        nothing is committed after this returns, so the store can close."""
        self._stopping = True
        self.scheduler.stop()
        await self.alarms.stop()
        for cell in list(self.residency.cells.values()):
            await cell.stop_run()
        await self.tasks.close()
        await self.isolates.close()

    # -- the port every cell uses (CellPort) -------------------------------------------------

    def now(self) -> int:
        return self.clock.now()

    async def commit(self, write: Write) -> None:
        await self.store.write(write)
        if write.log:
            self.log_hub.notify(write.ref)

    def commit_soon(self, write: Write, done: Callable[[BaseException | None], None]) -> None:
        def committed(error: BaseException | None) -> None:
            if error is None and write.log:
                self.log_hub.notify(write.ref)
            done(error)

        self.store.write_soon(write, committed)

    async def read(self, ref: InstanceRef) -> Loaded | None:
        return await self.store.load(ref)

    async def read_journal(self, ref: InstanceRef) -> JournalText:
        return await self.store.journal(ref)

    def schedule(self, ref: InstanceRef, next_wake: int | None) -> None:
        now = self.clock.now()
        if next_wake is not None and next_wake <= now + self.residency_ms:
            if next_wake <= now and self.residency.start_pending(ref):
                return  # due already: the start under way settles it (`_start_cell`)
            self.alarms.schedule(ref, next_wake)
        else:
            self.alarms.cancel(ref)

    def request_run(self, ref: InstanceRef, priority: Priority) -> None:
        if not self._stopping:
            self.residency.request_run(ref, priority)

    def release(self, cell: Cell) -> None:
        self.residency.release(cell)

    def forget(self, cell: Cell) -> None:
        self.residency.forget(cell)
        self.residency.queue.discard(cell.ref)

    def lost(self, cell: Cell) -> None:
        self.residency.forget(cell)
        if not self._stopping:
            self._recover_later(cell.ref)
            # Runs requested while the store failed may have been dropped on the way (a
            # start that could not commit): once it works again, page in everything the
            # store says is runnable.
            self.residency.queue.overflowed = True
            self._refill.set()

    async def take_isolate(self) -> tuple[Isolate, bool]:
        return await self.isolates.take()

    async def give_isolate(self, isolate: Isolate) -> None:
        await self.isolates.give(isolate)

    async def join_isolate(self, ref: InstanceRef, fence: EffectFence | None) -> Tenant:
        inline = self.runs_inline(ref)
        env = self.settings.env_message
        return await self.isolates.join(
            self.settings.ops,
            fence,
            lambda fresh: {"k": "env", **env} if fresh else {"k": "reset"},
            inline=inline,
            shared=ref not in self.alone,
        )

    async def leave_isolate(self, tenant: Tenant, *, quiet: bool = True) -> None:
        await self.isolates.leave(tenant, quiet=quiet)

    def runs_alone(self, ref: InstanceRef) -> None:
        self.alone.add(ref)

    def runs_inline(self, ref: InstanceRef) -> bool:
        return self.settings.inline_turns and ref not in self.long_turns

    def ran_long(self, ref: InstanceRef) -> None:
        self.long_turns.add(ref)

    def spawn(
        self,
        coroutine: Coroutine[Any, Any, Any],
        what: str,
        on_error: ErrorHandler | None = None,
    ) -> None:
        self.tasks.spawn(coroutine, what, on_error)

    def _spawn_quiet(self, coroutine: Coroutine[Any, Any, Any], what: str) -> None:
        self.tasks.spawn(coroutine, what)

    # -- loading and starting cells ------------------------------------------------------------

    async def _load_cell(self, ref: InstanceRef) -> Cell | None:
        spec = self.specs.get(ref.workflow)
        if spec is None:
            return None
        epoch = self.lease.epoch
        loaded = await self.store.claim(ref)  # OwnedElsewhere: another node runs it
        if self.lease.epoch != epoch:
            raise StoreUnavailable(
                f"node {epoch} was taken over while {ref.workflow}/{ref.id} was loading"
            )
        if loaded is None:
            return None
        machine = Machine(
            loaded.state,
            loaded.steps,
            loaded.events,
            step_limit=spec.step_limit,
            history_dropped=loaded.history_dropped,
        )
        return Cell(self, ref, spec, machine)

    async def view(self, ref: InstanceRef) -> Cell | None:
        """A read-only cell of what the instance's owner committed last (for reads on a node
        that does not own it). It is never registered, run or committed."""
        spec = self.specs.get(ref.workflow)
        loaded = await self.store.load(ref) if spec is not None else None
        if spec is None or loaded is None:
            return None
        machine = Machine(loaded.state, loaded.steps, loaded.events, step_limit=spec.step_limit)
        return Cell(self, ref, spec, machine)

    async def peek_status(self, ref: InstanceRef) -> dict[str, Any] | None:
        """`status()` of an instance that is not in memory, from its committed row (and
        rollback phase): nothing is loaded or claimed, so a poll costs two reads. None if
        there is no such instance."""
        spec = self.specs.get(ref.workflow)
        peeked = await self.store.peek(ref) if spec is not None else None
        if spec is None or peeked is None:
            return None
        machine = Machine(
            peeked.state, peeked.steps, [], step_limit=spec.step_limit, history_dropped=True
        )
        return machine.status_view()

    # -- a store shared by several nodes (NodeEvents) ------------------------------------------

    def instances_claimed(self, claimed: list[Claimed]) -> None:
        """This node took these instances over: arm their deadlines and queue their runs."""
        for ref, next_wake, runnable in claimed:
            if ref.workflow not in self.specs:
                continue
            self.schedule(ref, next_wake)
            if runnable:
                self.request_run(ref, Priority.WAKE)

    async def run_forwarded(self, message: dict[str, Any]) -> Any:
        """An operation another node received for an instance this node owns."""
        return await self.ops["wf.binding"](message)

    def log_written(self, refs: list[InstanceRef] | None) -> None:
        """Another node logged events for these instances: wake their subscribers here."""
        if refs is None:
            self.log_hub.notify_all()
            return
        for ref in refs:
            self.log_hub.notify(ref)

    def _rejoined(self, old: int, new: int) -> None:
        """The node was taken over and joined again under a new token: every cell loaded
        under the old one holds memory another node may have moved past. Drop them all now
        (their runs stop; their fences would never open again anyway) and load each again
        from the store, where most are owned by another node by now."""
        cells = list(self.residency.cells.values())
        log.warning(
            "node %d was taken over (now node %d): dropping the %d instances it had in "
            "memory; they are reloaded from the store",
            old,
            new,
            len(cells),
        )
        self._scanned_to = None  # the next horizon scan reads every deadline again
        for cell in cells:
            cell.break_(StoreUnavailable(f"node {old} was taken over"))

    async def _start_cell(self, cell: Cell, priority: Priority) -> None:
        """A slot is held for `cell` (`starting` is set): start its run if it needs one."""
        try:
            if priority is Priority.PRELOAD:
                if cell.machine.status is Status.WAITING:
                    await cell.start_run(preload=True)
            elif await cell.prepare_run():
                self.residency.touch(cell)
                await cell.start_run()
        finally:
            # Alarms due meanwhile were left to this start (`Residency.start_pending`):
            # without a run to have settled them, the cell's next deadline is armed again.
            self.residency.start_over(cell.ref)
            if cell.run is None and not cell.broken:
                self.schedule(cell.ref, cell.machine.next_wake())
            if cell.starting:  # no run was started: give the slot back
                cell.starting = False
                self.residency.release(cell)

    @asynccontextmanager
    async def using(self, ref: InstanceRef) -> AsyncIterator[Cell | None]:
        async with self.residency.using(ref) as cell:
            yield cell

    def loaded(self, ref: InstanceRef) -> Cell | None:
        return self.residency.get(ref)

    # -- creating instances ------------------------------------------------------------------

    async def create(self, machines: list[Machine]) -> list[InstanceRef]:
        """Commit new instances in one transaction and queue their runs; returns the refs
        created, in order (ids already taken are left out). Raises StoreUnavailable, and
        then nothing was created."""
        refs = [InstanceRef(m.state.workflow, m.state.id) for m in machines]
        if self.introspection is None:
            return await self._create(refs, machines)
        created: list[InstanceRef] = []
        try:
            for machine in machines:
                self.introspection.stage(machine, self.clock.now())
            created = await self._create(refs, machines)
            return created
        finally:
            self.introspection.settle(refs, created)

    async def _create(self, refs: list[InstanceRef], machines: list[Machine]) -> list[InstanceRef]:
        epoch = self.lease.epoch
        async with self.residency.creating(refs) as claimed:
            cells = [
                Cell(self, ref, self.specs[ref.workflow], machine)
                for ref, machine in zip(refs, machines, strict=True)
                if ref in claimed
            ]
            writes = [w for w in (c.take_write() for c in cells) if w is not None]
            skipped = await self.store.write_many(writes) if writes else set()
            created = [c for c in cells if c.ref not in skipped]
            # Created under a token the node has lost since: the cells' fences never open,
            # and the instances are loaded afresh by whichever node owns them now.
            kept = self.lease.epoch == epoch
            for cell, write in zip(cells, writes, strict=True):
                if cell.ref not in skipped and kept:
                    self.residency.add(cell)
                    cell.committed(write.next_wake)
        for cell in created:
            if not self._stopping:
                # held in memory for its first run (a few of them), else unloaded until then
                self.residency.request_run(cell.ref, Priority.NEW, hold=cell if kept else None)
            if kept:
                self.residency.release(cell)
        return [c.ref for c in created]

    async def _create_scheduled(self, machine: Machine) -> bool:
        """A cron schedule's instance (celld.cells.schedules); False if its id is taken."""
        return bool(await self.create([machine]))

    # -- store failures ---------------------------------------------------------------------

    def _recover_later(self, ref: InstanceRef) -> None:
        """Load `ref` again once the store works, and carry on where its rows say."""
        self._scanned_to = None  # the next horizon scan reads every deadline again
        if ref in self._recovering:
            return
        self._recovering.add(ref)
        self.tasks.spawn(self._recover(ref), "reloading an instance after a store failure")

    async def _recover(self, ref: InstanceRef) -> None:
        try:
            while True:
                await self.store.health.wait_healthy(self.store.probe)
                try:
                    async with self.residency.using(ref) as cell:
                        if cell is None:
                            return
                        self.schedule(ref, cell.machine.next_wake())
                        if cell.run is None and not cell.starting and await cell.prepare_run():
                            self.request_run(ref, Priority.WAKE)
                    return
                except OwnedElsewhere:
                    return  # taken over by another node meanwhile: it runs there
                except StoreUnavailable:
                    continue
        finally:
            self._recovering.discard(ref)

    # -- paging runnable instances in ----------------------------------------------------------

    def _refill_wanted(self) -> None:
        """The run queue has room: wake the refill, if it has anything to do (every
        dispatch with room calls this; waking an idle refill cost each run a task step)."""
        if self.residency.queue.overflowed or self._refilling:
            self._refill.set()

    async def _refill_loop(self) -> None:
        """Whenever the run queue overflowed and has room again, page through the store's
        runnable index and queue what is not running (in key order, a page at a time)."""
        queue = self.residency.queue
        while True:
            if not (queue.overflowed and queue.has_room):
                self._refill.clear()
                await self._refill.wait()
                continue
            # Runs started while the store cannot commit would only fail again.
            await self.store.health.wait_healthy(self.store.probe)
            queue.overflowed = False
            try:
                await self._refill_pass()
            except StoreUnavailable:
                queue.overflowed = True
                await self.store.health.wait_healthy(self.store.probe)
                self._refill.set()

    async def _refill_pass(self) -> None:
        self._refilling = True
        try:
            await self._refill_page_in()
        finally:
            self._refilling = False

    async def _refill_page_in(self) -> None:
        queue = self.residency.queue
        after: InstanceRef | None = None
        while True:
            while not queue.has_room:
                self._refill.clear()
                await self._refill.wait()
            room = max(1, queue.capacity - len(queue))
            page = await self.store.runnable(min(REFILL_PAGE, room), after)
            for ref in page:
                cell = self.residency.get(ref)
                if ref.workflow not in self.specs or ref in queue:
                    after = ref
                    continue
                if cell is not None and (cell.run is not None or cell.starting):
                    after = ref
                    continue
                if not queue.push(ref, Priority.NEW):
                    break
                after = ref
            self.residency.dispatch()
            if len(page) < min(REFILL_PAGE, room):
                return

    # -- alarms ------------------------------------------------------------------------------

    def _on_alarm(self, ref: InstanceRef, when: int) -> None:
        if self.residency.start_pending(ref):
            return  # armed before its wake-up was queued: that start settles it
        if self.residency.get(ref) is None and not self.residency.busy(ref):
            # Hibernated: all a deadline can do is start a run (a replay), so queue it
            # without reading the instance first; the run's start reads it once, and an
            # alarm firing again for a run already queued costs nothing.
            self.request_run(ref, Priority.WAKE)
            return
        cell = self.residency.get(ref)
        if self.tasks.closed:
            return
        if cell is not None and cell.alarm_now(lambda error: self._woken(ref, error)):
            return  # a resident run: its due calls are settled without a task
        self.tasks.spawn(self._wake(ref), "waking an instance", self._wake_failed(ref))

    def _woken(self, ref: InstanceRef, error: BaseException | None) -> None:
        """The commit of a resident wake-up landed (or failed)."""
        if error is not None:  # as the task of `_wake` would have failed
            log.error("waking %s/%s failed", ref.workflow, ref.id, exc_info=error)
            self._wake_failed(ref)(error)

    def _wake_failed(self, ref: InstanceRef) -> ErrorHandler:
        def handle(error: BaseException) -> None:
            if isinstance(error, StoreUnavailable):
                self._recover_later(ref)

        return handle

    async def _wake(self, ref: InstanceRef) -> None:
        try:
            async with self.residency.using(ref) as cell:
                if cell is not None:
                    await cell.on_alarm()
        except OwnedElsewhere:
            self.alarms.cancel(ref)  # another node took it over: its deadline is armed there

    async def _scan_horizon(self) -> None:
        """Load alarms for every deadline inside the window, and bring the earliest of those
        instances in ahead of time (while slots are free) so that they are resident and
        only resolve a promise when their deadline comes.

        A scan reads only deadlines from where the previous one stopped (`_scanned_to`):
        one already read was armed then, and once its alarm fires its wake-up is queued
        (never left out) and commits the next deadline, while a deadline that moves
        earlier is armed by the commit that moves it (`schedule`). Reading the overdue
        rows again every half window cost a wake-up storm a scan of the whole backlog
        each time (bench/PROFILE.md). A full scan still runs every `FULL_SCAN_MS`, at
        start, after the clock moved back, and after anything that dropped cells."""
        now = self.clock.now()
        horizon = now + self.residency_ms
        scanned_to = self._scanned_to
        if scanned_to is not None and (
            scanned_to > horizon or now - self._full_scan_at >= FULL_SCAN_MS
        ):
            scanned_to = None
        if scanned_to is None:
            self._full_scan_at = now
        self._scanned_to = None  # until this scan has read everything up to its horizon
        after: tuple[int, str, str] | None = None if scanned_to is None else (scanned_to, "", "")
        residency = self.residency
        free = residency.max_resident - residency.resident_count - len(residency.queue)
        preload = max(0, free // 2)
        # deadlines read earlier that found no free slot to preload then
        waiting, self._preload_later = self._preload_later, []
        for ref, when in waiting:
            preload = self._preload(ref, when, now, preload)
        while len(self.alarms) < MAX_ALARMS_IN_MEMORY:
            page = await self.store.due(horizon, SCAN_PAGE, after)
            for ref, when in page:
                if ref.workflow not in self.specs:
                    continue
                # Not armed while a wake-up of it is queued or a start is under way
                # (`Residency.start_pending`): that start settles every deadline due when
                # it runs, and one that ends without a run arms the deadline again.
                if when <= now and residency.start_pending(ref):
                    continue
                cell = residency.get(ref)
                if cell is not None:
                    # In memory, the cell's deadline is the truth: the row may still hold
                    # one a resident wake-up settled without a commit of its own, and an
                    # alarm for it would fire again for nothing.
                    wake = cell.machine.next_wake()
                    if wake is not None and wake <= horizon:
                        self.alarms.schedule(ref, wake)
                    continue
                self.alarms.schedule(ref, when)
                preload = self._preload(ref, when, now, preload)
            if len(page) < SCAN_PAGE:
                self._scanned_to = horizon
                return
            last_ref, last_when = page[-1]
            after = (last_when, last_ref.workflow, last_ref.id)

    def _preload(self, ref: InstanceRef, when: int, now: int, budget: int) -> int:
        """Bring a hibernated instance due at `when` in ahead of its deadline if the budget
        allows, else keep it for the next scan; returns the budget left."""
        if when <= now or self.residency.get(ref) is not None:
            return budget
        if budget:
            self.request_run(ref, Priority.PRELOAD)
            return budget - 1
        if len(self._preload_later) < PRELOAD_LATER_MAX:
            self._preload_later.append((ref, when))
        return budget

    async def _horizon_loop(self) -> None:
        while True:
            await self.clock.sleep_until(self.clock.now() + max(1, self.residency_ms // 2))
            try:
                await self._scan_horizon()
            except StoreUnavailable as error:  # the next pass retries
                log.warning("scanning for due instances failed: %s", error)

    async def _sweep_loop(self) -> None:
        while True:
            await self.clock.sleep_until(self.clock.now() + SWEEP_INTERVAL_MS)
            try:
                await self.sweep_expired()
            except StoreUnavailable as error:  # the next pass retries
                log.warning("deleting expired instances failed: %s", error)

    async def sweep_expired(self) -> int:
        """Delete finished instances whose retention is over; their ids become free."""
        now = self.clock.now()
        expired = [r for r in await self.store.expired(now, 1000) if self.residency.get(r) is None]
        if expired:
            await self.store.delete_expired(expired, now)
        return len(expired)

    # -- observability -----------------------------------------------------------------

    @property
    def resident_count(self) -> int:
        return self.residency.resident_count

    @property
    def max_resident(self) -> int:
        return self.residency.max_resident

    @property
    def start_counts(self) -> StartCounts:
        """How runs admitted together were started (celld/cells/startbatch.py)."""
        return self.residency.start_counts

    @property
    def run_queue_length(self) -> int:
        return len(self.residency.queue)

    @property
    def cells(self) -> dict[InstanceRef, Cell]:
        return self.residency.cells

    async def describe(self, workflow: str, instance_id: str) -> dict[str, Any] | None:
        """An operator's view of one instance: status, deadlines and every step row."""
        ref = InstanceRef(workflow, instance_id)
        try:
            async with self.using(ref) as cell:
                return await self._describe(cell)
        except OwnedElsewhere:
            return await self._describe(await self.view(ref))

    async def _describe(self, cell: Cell | None) -> dict[str, Any] | None:
        if cell is None:
            return None
        machine = cell.machine
        state = machine.state
        steps, events = await cell.history()
        rollback_rows = [row for row in steps if row.type == rollback.ROLLBACK]
        steps = [row for row in steps if row.type != rollback.ROLLBACK]
        return {
            "id": state.id,
            "workflow": state.workflow,
            **cell.snapshot,
            "version": state.version,  # the Worker version it started on
            "created_at": state.created_at,
            "started_at": state.started_at,
            "finished_at": state.finished_at,
            "next_wake": machine.next_wake(),
            "stall_deadline": machine.stall_deadline(),
            "resident": cell.run is not None,
            # what the live run is doing (test helpers wait for it to settle)
            "starting": cell.starting,
            "attempts_in_flight": machine.in_flight(),
            "calls_pending": len(machine.pending()),
            # params, output and step values are the serializer's text
            "params": state.params,
            "output": state.output,
            "steps": [
                {
                    "type": row.type,
                    "name": row.name,
                    "count": row.count,
                    "state": row.state,
                    "failed_attempts": row.attempts,
                    "wake_at": row.wake_at,
                    "error": row.error.to_dict() if row.error else None,
                    "started_at": row.started_at,
                    "finished_at": row.finished_at,
                    "config": row.config,
                    # a `sensitive: "output"` step's value is never shown (replay
                    # still returns it)
                    "value": SENSITIVE_VALUE if _sensitive(row.config) else row.value,
                    "event_type": row.event_type,
                }
                for row in steps
            ],
            "events": [
                {
                    "type": e.type,
                    "timestamp": e.timestamp,
                    "consumed": e.consumed_by is not None,
                    "payload": e.payload,
                }
                for e in events
            ],
            "rollback": rollback.progress(machine.rollback_phase, rollback_rows),
        }

    async def isolate_memory(self) -> int:
        """Bytes used by every resident workflow isolate (asked on each one's thread)."""
        total = 0
        seen: set[int] = set()  # (runs share isolates: each is counted once)
        for cell in self.residency.resident_cells():
            run = cell.run
            if run is None or run.host.isolate.fault is not None or id(run.host.isolate) in seen:
                continue
            seen.add(id(run.host.isolate))
            try:
                total += int((await run.host.isolate.memory()).get("memory_used_size", 0))
            except Exception:  # noqa: BLE001 - an isolate closing meanwhile counts as zero
                continue
        return total
