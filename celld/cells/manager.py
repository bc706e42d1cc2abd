"""The cell manager: which instances are loaded, which hold an isolate, and when they wake.

* A cell is loaded only while something uses it (an operation, a run); otherwise
  its instance exists only as rows in the store (hibernated).
* A run needs an isolate slot. Slots are capped (`max_resident`); beyond the cap
  the least recently used parked cell (resident but only waiting) hibernates.
  Runs waiting for a slot are queued with wake-ups ahead of new instances, as on
  Cloudflare.
* Alarms for deadlines inside the residency window are held in memory; a scan of
  the store's wake index every half window brings in the next ones.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from celld.cells.alarms import AlarmQueue
from celld.cells.binding import WorkflowBindings
from celld.cells.cell import Cell
from celld.cells.clock import Clock
from celld.cells.trim import trim_after_bursts
from celld.cells.warm import WarmIsolates
from celld.engine import (
    Machine,
    Status,
)
from celld.isolate.host import OpHandler
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.program import Program
from celld.isolate.threads import JsThreadPool
from celld.store.base import InstanceRef, Store

log = logging.getLogger("celld.cells")

DEFAULT_RESIDENCY_MS = 3_600_000
MAX_BATCH = 100
SWEEP_INTERVAL_MS = 60_000
WAKE_PRIORITY = 0
NEW_PRIORITY = 1
PRELOAD_PRIORITY = 2  # bringing an instance in before its deadline: after everything else
SCAN_PAGE = 5_000
MAX_ALARMS_IN_MEMORY = 500_000


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


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    binding: str
    class_name: str
    step_limit: int


@dataclass
class CellSettings:
    residency_ms: int = DEFAULT_RESIDENCY_MS
    max_resident: int = 0  # 0: default_max_resident()
    replay_every_step: bool = False

    @classmethod
    def from_environment(cls) -> CellSettings:
        """CELLD_ALARM_RESIDENT_MS, CELLD_MAX_RESIDENT, CELLD_REPLAY_EVERY_STEP."""
        env = os.environ
        return cls(
            residency_ms=int(env.get("CELLD_ALARM_RESIDENT_MS", DEFAULT_RESIDENCY_MS)),
            max_resident=int(env.get("CELLD_MAX_RESIDENT", 0)),
            replay_every_step=env.get("CELLD_REPLAY_EVERY_STEP", "") not in ("", "0", "false"),
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
        self.specs = dict(specs)
        self.store = store
        self.clock = clock
        self.threads = threads
        self.program = program
        self.ops = dict(ops)
        self.ops["wf.binding"] = WorkflowBindings(self).handle
        self.env_message = env_message
        self.limits = limits or Limits()
        settings = settings or CellSettings()
        self.residency_ms = settings.residency_ms
        self.max_resident = settings.max_resident or default_max_resident()
        self.replay_every_step = settings.replay_every_step
        self.cells: dict[InstanceRef, Cell] = {}
        self.resident_count = 0
        self.runs_started = 0
        self._lru: OrderedDict[InstanceRef, Cell] = OrderedDict()
        self._run_queue: list[tuple[int, int, InstanceRef]] = []
        self._queued: set[InstanceRef] = set()
        self._order = itertools.count()
        self._loading: dict[InstanceRef, asyncio.Future[Cell | None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.alarms = AlarmQueue(clock, self._on_alarm)
        self.warm = WarmIsolates(capacity=4 * len(threads.threads))
        self._background: list[asyncio.Task[None]] = []

    # -- start and stop ------------------------------------------------------------------

    async def start(self) -> None:
        """Resume every unfinished instance: runnable ones run, due alarms are loaded."""
        self.alarms.start()
        for ref in await self.store.runnable():
            if ref.workflow in self.specs:
                self._spawn(self._recover(ref))
        await self._scan_horizon()
        loop = asyncio.get_running_loop()
        self._background = [
            loop.create_task(self._horizon_loop()),
            loop.create_task(self._sweep_loop()),
            loop.create_task(
                trim_after_bursts(
                    lambda: not self._run_queue and self.resident_count < self.max_resident // 2,
                    lambda: self.runs_started,
                )
            ),
        ]

    async def stop(self) -> None:
        for task in self._background:
            task.cancel()
        await self.alarms.stop()
        for task in list(self._tasks):
            task.cancel()
        for cell in list(self.cells.values()):
            await cell.drop_isolate()
        for isolate in self.warm.drain():
            await isolate.close()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cell task failed", exc_info=task.exception())

    async def _recover(self, ref: InstanceRef) -> None:
        async with self.using(ref) as cell:
            if cell is None:
                return
            must_run = cell.machine.recover(self.clock.now())
            await cell.persist()
            if must_run:
                self.request_run(cell, wake=True)

    # -- loading cells -------------------------------------------------------------------

    @asynccontextmanager
    async def using(self, ref: InstanceRef) -> AsyncIterator[Cell | None]:
        """Hold the instance's cell loaded for the duration of an operation."""
        cell = await self._load(ref)
        if cell is None:
            yield None
            return
        cell.users += 1
        try:
            yield cell
        finally:
            cell.users -= 1
            self.cell_settled(cell)

    async def _load(self, ref: InstanceRef) -> Cell | None:
        cell = self.cells.get(ref)
        if cell is not None:
            return cell
        pending = self._loading.get(ref)
        if pending is not None:
            return await pending
        spec = self.specs.get(ref.workflow)
        if spec is None:
            return None
        future: asyncio.Future[Cell | None] = asyncio.get_running_loop().create_future()
        self._loading[ref] = future
        try:
            loaded = await self.store.load(ref)
            if loaded is None:
                cell = None
            else:
                machine = Machine(
                    loaded.state, loaded.steps, loaded.events, step_limit=spec.step_limit
                )
                cell = Cell(self, ref, spec, machine)
                self.cells[ref] = cell
            future.set_result(cell)
            return cell
        except BaseException as error:
            future.set_exception(error)
            raise
        finally:
            del self._loading[ref]

    def cell_settled(self, cell: Cell) -> None:
        """Unload a cell nobody uses and that has no run in memory (it hibernates)."""
        idle = cell.users == 0 and cell.host is None and not cell.starting
        if idle and self.cells.get(cell.ref) is cell:
            del self.cells[cell.ref]

    # -- isolate slots and the run queue ---------------------------------------------------

    def request_run(self, cell: Cell, *, wake: bool, priority: int | None = None) -> None:
        """Queue a run (replay) of `cell`; wake-ups go before new instances."""
        if cell.ref in self._queued:
            return
        cell.starting = True
        self.cells[cell.ref] = cell
        self._queued.add(cell.ref)
        if priority is None:
            priority = WAKE_PRIORITY if wake else NEW_PRIORITY
        heapq.heappush(self._run_queue, (priority, next(self._order), cell.ref))
        self._dispatch()

    def _dispatch(self) -> None:
        while self._run_queue:
            if self.resident_count >= self.max_resident and not self._evict_one():
                return
            _, _, ref = heapq.heappop(self._run_queue)
            self._queued.discard(ref)
            cell = self.cells.get(ref)
            if cell is None or not cell.starting:
                continue
            self.resident_count += 1
            self.runs_started += 1
            self._lru[ref] = cell
            self._spawn(cell.start_run())

    def _evict_one(self) -> bool:
        for ref, cell in self._lru.items():
            if cell.parked:
                self._lru.pop(ref)
                self._spawn(self._hibernate(cell))
                return True
        return False

    async def _hibernate(self, cell: Cell) -> None:
        await cell.drop_isolate()
        self.cell_settled(cell)

    def release_slot(self, cell: Cell) -> None:
        self.resident_count -= 1
        self._lru.pop(cell.ref, None)
        self._dispatch()

    async def recycle(self, isolate: Isolate) -> None:
        """Keep a finished run's isolate warm for the next run, or free it."""
        surplus = self.warm.give(isolate)
        if surplus is not None:
            await surplus.close()

    def parked(self, cell: Cell) -> None:
        """A resident cell is only waiting now: runs queued for a slot may take its place."""
        if self._run_queue:
            self._dispatch()

    def touch(self, cell: Cell) -> None:
        if cell.ref in self._lru:
            self._lru.move_to_end(cell.ref)

    # -- alarms ------------------------------------------------------------------------

    def after_commit(self, cell: Cell, next_wake: int | None) -> None:
        if next_wake is not None and next_wake <= self.clock.now() + self.residency_ms:
            self.alarms.schedule(cell.ref, next_wake)
        else:
            self.alarms.cancel(cell.ref)

    def _on_alarm(self, ref: InstanceRef, when: int) -> None:
        self._spawn(self._wake(ref))

    async def _wake(self, ref: InstanceRef) -> None:
        async with self.using(ref) as cell:
            if cell is not None:
                await cell.on_alarm()

    async def _scan_horizon(self) -> None:
        """Load alarms for every deadline inside the window, and bring the earliest of those
        instances in ahead of time (while slots are free) so that they are resident and
        only resolve a promise when their deadline comes."""
        now = self.clock.now()
        horizon = now + self.residency_ms
        after: tuple[int, str, str] | None = None
        preload = max(0, (self.max_resident - self.resident_count - len(self._run_queue)) // 2)
        while len(self.alarms) < MAX_ALARMS_IN_MEMORY:
            page = await self.store.due(horizon, SCAN_PAGE, after)
            for ref, when in page:
                if ref.workflow not in self.specs:
                    continue
                self.alarms.schedule(ref, when)
                if preload and when > now and ref not in self.cells:
                    preload -= 1
                    self._spawn(self._preload(ref))
            if len(page) < SCAN_PAGE:
                return
            last_ref, last_when = page[-1]
            after = (last_when, last_ref.workflow, last_ref.id)

    async def _preload(self, ref: InstanceRef) -> None:
        async with self.using(ref) as cell:
            if cell is None or cell.host is not None or cell.starting:
                return
            if cell.machine.status is Status.WAITING:
                cell.preloading = True
                self.request_run(cell, wake=False, priority=PRELOAD_PRIORITY)

    async def _horizon_loop(self) -> None:
        while True:
            await self.clock.sleep_until(self.clock.now() + max(1, self.residency_ms // 2))
            try:
                await self._scan_horizon()
            except Exception:  # noqa: BLE001 - keep scanning; the next pass retries
                log.exception("scanning for due instances failed")

    async def _sweep_loop(self) -> None:
        while True:
            await self.clock.sleep_until(self.clock.now() + SWEEP_INTERVAL_MS)
            try:
                await self.sweep_expired()
            except Exception:  # noqa: BLE001 - keep sweeping; the next pass retries
                log.exception("deleting expired instances failed")

    async def sweep_expired(self) -> int:
        """Delete finished instances whose retention is over; their ids become free."""
        expired = [
            r for r in await self.store.expired(self.clock.now(), 1000) if r not in self.cells
        ]
        if expired:
            await self.store.delete(expired)
        return len(expired)

    # -- observability -----------------------------------------------------------------

    async def describe(self, workflow: str, instance_id: str) -> dict[str, Any] | None:
        """An operator's view of one instance: status, deadlines and every step row."""
        ref = InstanceRef(workflow, instance_id)
        async with self.using(ref) as cell:
            if cell is None:
                return None
            machine = cell.machine
            state = machine.state
            return {
                "id": state.id,
                "workflow": state.workflow,
                **cell.snapshot,
                "created_at": state.created_at,
                "started_at": state.started_at,
                "finished_at": state.finished_at,
                "next_wake": machine.next_wake(),
                "stall_deadline": machine.stall_deadline(),
                "resident": cell.resident,
                "steps": [
                    {
                        "type": row.type,
                        "name": row.name,
                        "count": row.count,
                        "state": row.state,
                        "failed_attempts": row.attempts,
                        "wake_at": row.wake_at,
                        "error": row.error.to_dict() if row.error else None,
                    }
                    for row in machine.steps()
                ],
                "events": [
                    {
                        "type": e.type,
                        "timestamp": e.timestamp,
                        "consumed": e.consumed_by is not None,
                    }
                    for e in machine.events()
                ],
            }

    @property
    def run_queue_length(self) -> int:
        return len(self._run_queue)

    async def isolate_memory(self) -> int:
        """Bytes used by every resident workflow isolate (asked on each one's thread)."""
        total = 0
        for cell in list(self.cells.values()):
            host = cell.host
            if host is None or host.isolate.fault is not None:
                continue
            try:
                total += int((await host.isolate.memory()).get("memory_used_size", 0))
            except Exception:  # noqa: BLE001 - an isolate closing meanwhile counts as zero
                continue
        return total
