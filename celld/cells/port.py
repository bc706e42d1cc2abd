"""What a cell may ask of the layer that owns it, and nothing more.

A cell holds one instance's machine and, while resident, its run. It never reaches
into the manager: durable changes go through `commit`, deadlines through `schedule`,
the isolate slot comes back through `release`, time through `now`. The few other
things a run needs (isolates, owned tasks, static settings) are named here too, so
that this protocol is the whole of the coupling.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from celld.cells.clock import Clock
from celld.cells.runqueue import Priority
from celld.cells.tasks import ErrorHandler
from celld.engine.decisions import JournalText
from celld.isolate.host import OpHandler
from celld.isolate.isolate import Isolate
from celld.isolate.linemap import LineMap
from celld.isolate.tenant import Tenant
from celld.store.base import InstanceRef, Loaded, Write
from celld.store.lease import NO_LEASE, EffectFence, Lease

if TYPE_CHECKING:
    from celld.cells.cell import Cell
    from celld.cells.introspection import Introspection


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    binding: str
    class_name: str
    step_limit: int
    schedules: tuple[str, ...] = ()  # cron expressions (UTC), celld.cells.schedules


@dataclass(frozen=True)
class RunSettings:
    """What every run of every cell shares (read-only)."""

    residency_ms: int
    replay_every_step: bool
    #: runs' turns go on the event-loop thread (celld/isolate/isolate.py, "inline")
    inline_turns: bool
    env_message: Mapping[str, Any]
    ops: Mapping[str, OpHandler]
    lines: LineMap
    #: test modifiers of instances (test mode only)
    introspection: Introspection | None = None
    #: the node's lease on a shared store: each cell takes a fence of it when loaded, and
    #: its runs neither turn nor send while the fence says no (celld/store/lease.py)
    lease: Lease = NO_LEASE


class CellPort(Protocol):
    clock: Clock
    settings: RunSettings
    version: str | None  # the Worker bundle's hash (version pinning)

    def now(self) -> int: ...

    async def commit(self, write: Write) -> None:
        """Commit one instance's changes (raises StoreUnavailable, DuplicateInstance)."""
        ...

    def commit_soon(self, write: Write, done: Callable[[BaseException | None], None]) -> None:
        """Commit like `commit`, then call `done(None)` or `done(error)` on the event loop
        (no task or future: the step path's commit)."""
        ...

    async def read(self, ref: InstanceRef) -> Loaded | None:
        """The instance's committed rows (to restore history dropped from memory)."""
        ...

    async def read_journal(self, ref: InstanceRef) -> JournalText:
        """The instance's committed finished steps as journal text (`Store.journal`)."""
        ...

    def schedule(self, ref: InstanceRef, next_wake: int | None) -> None:
        """The instance's next deadline is now `next_wake` (None: none)."""
        ...

    def request_run(self, ref: InstanceRef, priority: Priority) -> None:
        """The instance needs a run (replay) in an isolate."""
        ...

    def release(self, cell: Cell) -> None:
        """The cell's run is over (its slot is free) or an operation on it ended: unload it
        if nothing holds it any more."""
        ...

    def forget(self, cell: Cell) -> None:
        """The instance is gone (deleted): drop the cell from memory now."""
        ...

    def lost(self, cell: Cell) -> None:
        """The cell's memory can no longer be trusted (a commit failed): forget it and load
        the instance again from the store once the store works."""
        ...

    async def take_isolate(self) -> tuple[Isolate, bool]:
        """An isolate for a run: (isolate, fresh); raises what loading the Worker raised."""
        ...

    async def join_isolate(self, ref: InstanceRef, fence: EffectFence | None) -> Tenant:
        """A place for the instance's run in an isolate, usually one shared with other runs
        (celld/cells/isolates.py); raises what loading the Worker raised."""
        ...

    async def leave_isolate(self, tenant: Tenant, *, quiet: bool = True) -> None:
        """The run is over in its isolate (the isolate goes back once its last run left);
        `quiet`: its run() ended or it only waits (celld/isolate/host.py, `remove_tenant`)."""
        ...

    def runs_alone(self, ref: InstanceRef) -> None:
        """A fault of a shared isolate could not be pinned on one run: the instance's runs
        get an isolate of their own from now on, so a second one can."""
        ...

    def runs_inline(self, ref: InstanceRef) -> bool:
        """Whether the instance's runs turn on the event-loop thread (celld/isolate/isolate.py)."""
        ...

    def ran_long(self, ref: InstanceRef) -> None:
        """A turn of the instance ran too long for the event loop: run it on JS threads."""
        ...

    async def give_isolate(self, isolate: Isolate) -> None: ...

    def spawn(
        self,
        coroutine: Coroutine[Any, Any, Any],
        what: str,
        on_error: ErrorHandler | None = None,
    ) -> None: ...
