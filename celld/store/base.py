"""The store interface the cells use.

Rules every store keeps (SQLite in celld/store/sqlite.py, PostgreSQL in
celld/store/postgres.py):

* A write is one instance's changes, committed atomically; `write_many` commits several
  instances' changes in one transaction (all of them or none).
* The store is the judge of instance ids: a write whose changes create an instance fails
  with :class:`DuplicateInstance` when the id is taken by an instance still retained (one
  whose retention is over is replaced, its rows deleted in the same transaction). No
  interleaving of creates can give one id two rows.
* Any other failure to commit (full disk, I/O error, a lock held past its timeout, a dead
  writer) raises :class:`StoreUnavailable`, and the transaction changed nothing. Callers
  treat it as transient: nothing that depended on the write may be acknowledged.
* A store shared by several nodes (PostgreSQL) has each instance owned by one node at a
  time: only the owner's writes commit (`Fenced` otherwise), `claim` takes over instances
  whose owner is gone, and `forward` hands operations to the owner. Its `lease` is what
  the node obeys itself (celld/store/lease.py): no JS turn and no outgoing message while
  it is not valid, and nothing loaded under a token the node lost ever acts again.
* A read sees every write acknowledged before the read began, however reads overlap.
* Reads never hold a transaction open while JS runs; wake-ups are found through an index on
  each instance's next deadline, runnable instances through an index on a flag, both paged
  by key so that a million rows stream in pages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from celld.engine.decisions import JournalText
from celld.engine.state import Changes, EventRecord, InstanceState, StepRecord
from celld.store.health import StoreHealth
from celld.store.lease import Lease


@dataclass(frozen=True, slots=True, order=True)
class InstanceRef:
    workflow: str
    id: str


@dataclass(frozen=True)
class Loaded:
    """Everything needed to rebuild an instance's machine."""

    state: InstanceState
    steps: list[StepRecord]
    events: list[EventRecord]
    #: a light load: only unfinished steps, the rollback phase and unconsumed events were
    #: read; the finished ones stay on disk (`Store.journal` reads them for a run)
    history_dropped: bool = False
    #: the finished steps left on disk as journal text, read in the same snapshot as the
    #: rows (`Store.claim_many`); None when the read did not bring it (then a run reads
    #: it with `Store.journal`)
    journal: JournalText | None = None


@dataclass(frozen=True)
class Write:
    """One instance's changes plus the derived fields the store indexes."""

    ref: InstanceRef
    changes: Changes
    next_wake: int | None
    runnable: bool  # queued or running: must be resumed after a restart
    delete: bool = False  # delete the instance and every row of it (its id becomes free)
    #: event log entries (timestamp ms, type, body JSON) committed with the changes; the
    #: store numbers them (celld.cells.instance_log; a `STEP_DONE` entry stands for four
    #: events, celld.store.logpack)
    log: tuple[tuple[int, str, str], ...] = ()


@dataclass(frozen=True)
class LogRow:
    """One logged event of an instance; `event_id` increases within an instance."""

    event_id: int
    timestamp: int
    type: str
    body: str


@dataclass(frozen=True)
class InstanceSummary:
    """One row of an instance listing (operator reads)."""

    id: str
    status: str
    created_at: int
    started_at: int | None
    finished_at: int | None


class DuplicateInstance(Exception):  # noqa: N818 - a verdict, not a failure of the store
    """An instance with this id already exists (and is retained)."""

    def __init__(self, ref: InstanceRef) -> None:
        super().__init__(f"instance {ref.workflow}/{ref.id} already exists")
        self.ref = ref


class StoreUnavailable(Exception):  # noqa: N818 - named for what the caller must do: retry
    """The store could not commit or read; nothing was changed. Transient by assumption:
    the caller backs off and tries again, and acknowledges nothing meanwhile."""


class Fenced(StoreUnavailable):
    """This node may not commit that write: the instance is owned by another node now (its
    lease was taken over), or this node's own lease ran out. Nothing was changed."""


class OwnedElsewhere(Exception):  # noqa: N818 - a verdict: another node runs this instance
    """Another live node owns the instance: operations on it go to that node."""

    def __init__(self, ref: InstanceRef, owner: int) -> None:
        super().__init__(f"instance {ref.workflow}/{ref.id} is run by node {owner}")
        self.ref = ref
        self.owner = owner


class NotDone(Exception):  # noqa: N818 - a verdict: send the operation again
    """A forwarded operation was not done where it was sent (its owner died before taking
    it, or no longer owns the instance); nothing was changed: dispatch it again."""


class OutcomeUnknown(Exception):  # noqa: N818 - what the caller must be told
    """The node owning the instance took a forwarded operation and died (or was cut off)
    before answering: it may or may not have been done."""


#: (instance, its next deadline, whether it needs a run): what a node took over.
Claimed = tuple[InstanceRef, int | None, bool]


class NodeEvents(Protocol):
    """What a store shared by several nodes tells the node using it."""

    def instances_claimed(self, claimed: list[Claimed]) -> None:
        """This node now owns these instances (taken over from a node that died or left)."""
        ...

    async def run_forwarded(self, message: dict[str, Any]) -> Any:
        """Do an operation another node received for an instance this node owns."""
        ...

    def log_written(self, refs: list[InstanceRef] | None) -> None:
        """Another node committed events to these instances' logs (None: to any instance,
        as far as this node knows: wake-ups may have been missed)."""
        ...


class Store(Protocol):
    health: StoreHealth
    #: what the node obeys before each JS turn and each message that leaves: a shared
    #: store's lease (celld/store/lease.py), NO_LEASE for a store of one node
    lease: Lease
    commits: int  # transactions committed (metrics, benchmarks)
    rows_written: int
    writer_restarts: int  # times the writer died and was replaced
    #: told of every committed write that logged or deleted something (the lifecycle log)
    on_committed: Callable[[Write], None] | None

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def write(self, write: Write) -> None:
        """Commit one instance's changes durably; many callers share one commit."""
        ...

    def write_soon(self, write: Write, done: Callable[[BaseException | None], None]) -> None:
        """Commit like `write`, then call `done(None)` or `done(error)` on the event loop:
        the step path's commit, with no task or future per caller."""
        ...

    async def write_many(self, writes: list[Write]) -> set[InstanceRef]:
        """Commit several instances' changes in one transaction (createBatch); returns the
        refs whose creation was skipped because the id is taken."""
        ...

    async def probe(self) -> None:
        """A tiny real commit: raises StoreUnavailable while the store cannot write."""
        ...

    async def load(self, ref: InstanceRef) -> Loaded | None:
        """The instance's committed rows (any node may read any instance)."""
        ...

    async def peek(self, ref: InstanceRef) -> Loaded | None:
        """The instance's row and its rollback phase row, if it has one: what a status read
        needs, without its history (any node may read any instance; nothing is claimed)."""
        ...

    async def claim(self, ref: InstanceRef) -> Loaded | None:
        """Load the instance to run it or change it: this node must own it. A store shared
        by several nodes takes it over if its owner is gone, and raises OwnedElsewhere if
        a live node owns it; a single-node store just loads it. It may be a light load
        (`Loaded.history_dropped`)."""
        ...

    async def claim_many(
        self, refs: list[InstanceRef]
    ) -> dict[InstanceRef, Loaded | OwnedElsewhere]:
        """`claim` for several instances at once (a batch of runs admitted together): each
        one found is in the answer, as its light load or as the OwnedElsewhere a `claim` of
        it would raise; one not found is left out. A store that can reads them all in one
        trip, each with its journal (`Loaded.journal`) from the same snapshot; otherwise
        it claims them one by one (`claim_each`). StoreUnavailable fails the whole call."""
        ...

    async def journal(self, ref: InstanceRef) -> JournalText:
        """The instance's committed finished steps as the JS journal's two sections of
        members, JSON text (``celld.engine.decisions.JournalText``): what a run needs of
        the history a light `claim` left on disk."""
        ...

    async def serve(self, events: NodeEvents) -> None:
        """Start the node's part in a shared store (takeovers, forwarded operations)."""
        ...

    async def forward(self, owner: int, message: dict[str, Any]) -> Any:
        """Have the node `owner` do an operation (see OwnedElsewhere) and return its answer."""
        ...

    async def exists(self, ref: InstanceRef) -> bool: ...
    async def due(
        self, before_ms: int, limit: int, after: tuple[int, str, str] | None = None
    ) -> list[tuple[InstanceRef, int]]:
        """Instances whose next deadline is before `before_ms`, earliest first."""
        ...

    async def runnable(self, limit: int, after: InstanceRef | None = None) -> list[InstanceRef]:
        """Instances that need a run (queued, running, pausing), in key order after `after`."""
        ...

    async def expired(self, now_ms: int, limit: int) -> list[InstanceRef]: ...
    async def delete_expired(self, refs: list[InstanceRef], now_ms: int) -> None:
        """Delete those of `refs` whose retention is over at `now_ms` (checked when
        committing, so an id reused meanwhile is not touched)."""
        ...

    async def counts(self) -> dict[str, int]: ...

    # -- instance event log (subscribe) ---------------------------------------------

    async def log_after(self, ref: InstanceRef, after: int, limit: int) -> list[LogRow]:
        """`ref`'s logged events with an id above `after`, oldest first, from at most
        `limit` stored rows (one row may hold several events: celld.store.logpack)."""
        ...

    async def log_ended(self, ref: InstanceRef, upto: int) -> bool:
        """Whether `ref` logged a final event (completed, errored, terminated) at or
        before `upto`."""
        ...

    # -- cron schedules ----------------------------------------------------------------

    async def schedule_ticks(self, workflow: str) -> dict[str, int]:
        """The last tick (epoch ms) handled for each cron expression of `workflow`."""
        ...

    async def record_tick(self, workflow: str, expression: str, tick_ms: int) -> None:
        """Commit that `expression`'s tick at `tick_ms` is handled (never moves back)."""
        ...

    # -- operator reads (listing and counts for the explorer API, CLI and page) ----------

    async def list_instances(
        self,
        workflow: str,
        *,
        offset: int = 0,
        limit: int = 25,
        status: str | None = None,
        created_from: int | None = None,
        created_to: int | None = None,
        id_contains: str | None = None,
    ) -> list[InstanceSummary]:
        """One page of a workflow's instances, newest first; `id_contains` keeps those
        whose id contains it, ignoring case."""
        ...

    async def count_instances(
        self,
        workflow: str,
        *,
        status: str | None = None,
        created_from: int | None = None,
        created_to: int | None = None,
        id_contains: str | None = None,
    ) -> int: ...
    async def workflow_counts(self, workflow: str) -> dict[str, int]: ...


async def claim_each(
    store: Store, refs: list[InstanceRef]
) -> dict[InstanceRef, Loaded | OwnedElsewhere]:
    """`Store.claim_many` one ref at a time, for a store without a read of its own for a
    batch (the journals are then read by each run, as after a single `claim`)."""
    claimed: dict[InstanceRef, Loaded | OwnedElsewhere] = {}
    for ref in refs:
        try:
            loaded = await store.claim(ref)
        except OwnedElsewhere as owned:
            claimed[ref] = owned
            continue
        if loaded is not None:
            claimed[ref] = loaded
    return claimed
