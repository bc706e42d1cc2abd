"""Cron `schedules`: start an instance of a workflow at each tick of its expressions.

Each (workflow, expression) has one timer for its next tick on the engine's clock. When
it fires, the instance for the latest tick that is due is created (id
`"<expression>-<tick ms>"`, :mod:`celld.project.cron`), then that tick is recorded in the
store, then the timer is armed for the tick after it.

* **Missed ticks run once.** Ticks that passed while celld was down (or while the clock
  jumped) are not replayed one by one: the first timer after start finds the latest due
  tick and starts that one instance, as a scheduler that was asleep would.
* **At most one instance per tick.** The id is the same for every attempt to start a
  tick, so a crash between creating the instance and recording its tick only makes the
  next start try the same id again, which the store refuses as taken.
* **A new expression starts now.** The first time celld sees an expression it records the
  current time as handled, so adding a schedule never starts instances for the past.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from celld.cells.clock import Cancellable, Clock
from celld.cells.port import WorkflowSpec
from celld.cells.tasks import TaskOwner
from celld.engine import Machine
from celld.project import cron
from celld.store.base import Store, StoreUnavailable

log = logging.getLogger("celld.schedules")

#: Params of a scheduled instance: what `create()` without params gives (an empty object).
SCHEDULED_PARAMS = "{}"


@dataclass
class ScheduleState:
    """What the operator view shows of one expression."""

    workflow: str
    expression: str
    last_tick: int  # the last tick handled (or when celld first saw the expression)
    next_tick: int
    last_instance: str | None = None

    def view(self) -> dict[str, Any]:
        return {
            "cron": self.expression,
            "lastTick": self.last_tick,
            "nextTick": self.next_tick,
            "lastInstanceId": self.last_instance,
        }


class Scheduler:
    """One timer per (workflow, expression); instances created through `create`."""

    def __init__(
        self,
        specs: Mapping[str, WorkflowSpec],
        store: Store,
        clock: Clock,
        create: Callable[[Machine], Awaitable[bool]],
        tasks: TaskOwner,
        version: str | None = None,
    ) -> None:
        self.specs = specs
        self.store = store
        self.clock = clock
        self._create = create
        self._tasks = tasks
        self._version = version
        self.states: dict[tuple[str, str], ScheduleState] = {}
        self._timers: dict[tuple[str, str], Cancellable] = {}
        self._stopped = False

    async def start(self) -> None:
        """Read the recorded ticks and arm every timer (a due one fires at once)."""
        now = self.clock.now()
        for spec in self.specs.values():
            if not spec.schedules:
                continue
            recorded = await self.store.schedule_ticks(spec.name)
            for expression in spec.schedules:
                last = recorded.get(expression)
                if last is None:
                    await self.store.record_tick(spec.name, expression, now)
                    last = now
                key = (spec.name, expression)
                self.states[key] = ScheduleState(
                    spec.name, expression, last, cron.next_tick(expression, last)
                )
                self._arm(key)

    def stop(self) -> None:
        self._stopped = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def of(self, workflow: str) -> list[dict[str, Any]]:
        """The schedules of `workflow` as the operator view shows them."""
        spec = self.specs.get(workflow)
        if spec is None:
            return []
        keys = [(workflow, expression) for expression in spec.schedules]
        return [self.states[key].view() for key in keys if key in self.states]

    def _arm(self, key: tuple[str, str]) -> None:
        if self._stopped:
            return
        state = self.states[key]
        self._timers[key] = self.clock.call_at(state.next_tick, lambda: self._due(key))

    def _due(self, key: tuple[str, str]) -> None:
        self._timers.pop(key, None)
        self._tasks.spawn(self._fire(key), f"starting the scheduled instance of {key[1]!r}")

    async def _fire(self, key: tuple[str, str]) -> None:
        state = self.states[key]
        workflow, expression = key
        tick = cron.latest_tick(expression, self.clock.now())
        instance_id = cron.scheduled_id(expression, tick)
        while True:
            try:
                machine = Machine.create(
                    workflow,
                    instance_id,
                    SCHEDULED_PARAMS,
                    self.clock.now(),
                    step_limit=self.specs[workflow].step_limit,
                    scheduled=True,
                    version=self._version,
                )
                if await self._create(machine):
                    log.info("schedule %r of %s started %s", expression, workflow, instance_id)
                else:
                    log.info("schedule %r of %s: %s exists already", expression, workflow, tick)
                await self.store.record_tick(workflow, expression, tick)
                break
            except StoreUnavailable as error:
                log.warning("schedule %r of %s waits for the store: %s", expression, workflow,
                            error)  # fmt: skip
                await self.store.health.wait_healthy(self.store.probe)
        state.last_tick = tick
        state.last_instance = instance_id
        state.next_tick = cron.next_tick(expression, tick)
        self._arm(key)
