"""What the SQL stores' group commits share: a caller's share of a batch, the rows a batch
gathers by kind, and telling every caller of a batch how it went."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from celld.engine.binary import store_form
from celld.isolate.inline import inline_turns
from celld.store.base import DuplicateInstance, InstanceRef, Write
from celld.store.health import StoreHealth
from celld.store.logpack import expand_entries, pack
from celld.store.rows import Encode, event_row, step_row

log = logging.getLogger("celld.store")

#: How a write queued with `write_soon` went: None (committed) or the error.
WriteDone = Callable[[BaseException | None], None]
#: Told of every write once it is committed (the lifecycle log), on the event loop.
CommitObserver = Callable[[Write], None]


@dataclass
class Pending:
    """One caller's share of a group commit."""

    writes: list[Write] = field(default_factory=list)
    expired: list[InstanceRef] = field(default_factory=list)  # delete if retention is over
    now: int = 0
    probe: bool = False
    ticks: list[tuple[str, str, int]] = field(default_factory=list)  # (workflow, cron, ms)
    future: asyncio.Future[set[InstanceRef]] | None = None
    #: instead of `future`: called on the event loop with the outcome (no task wakes up)
    done: Callable[[set[InstanceRef] | Exception], None] | None = None


class Statements(NamedTuple):
    """One dialect's statements for the rows a batch gathers, in the order they run."""

    wipe_steps: str
    wipe_events: str
    delete_step: str
    delete_event: str
    insert_instance: str
    upsert_instance: str
    upsert_step: str
    upsert_event: str
    insert_log: str


@dataclass
class Gathered:
    """A batch's rows by kind, each kind written with one executemany."""

    wipes: list[tuple[str, str]] = field(default_factory=list)
    deleted_steps: list[tuple[Any, ...]] = field(default_factory=list)
    deleted_events: list[tuple[Any, ...]] = field(default_factory=list)
    created: list[tuple[Any, ...]] = field(default_factory=list)
    instances: list[tuple[Any, ...]] = field(default_factory=list)
    steps: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    #: instance event log rows: (workflow, id, timestamp, type, body), plus the number of
    #: events the row holds when `pack_log` (celld.store.logpack)
    log: list[tuple[Any, ...]] = field(default_factory=list)
    #: one log row per write, numbered by the store; otherwise one row per event
    pack_log: bool = False
    #: how the store writes serialized values (celld/store/rows.py)
    encode: Encode = store_form

    def add_history(self, write: Write) -> None:
        """The write's step and event rows (and what it wipes or deletes of them), and
        its event log entries."""
        changes = write.changes
        workflow, instance_id = write.ref.workflow, write.ref.id
        if changes.wiped:
            self.wipes.append((workflow, instance_id))
        for key in changes.deleted_steps:
            self.deleted_steps.append((workflow, instance_id, key.type, key.name, key.count))
        for seq in changes.deleted_events:
            self.deleted_events.append((workflow, instance_id, seq))
        encode = self.encode
        self.steps.extend(step_row(workflow, instance_id, s, encode) for s in changes.steps)
        self.events.extend(event_row(workflow, instance_id, e, encode) for e in changes.events)
        if not write.log:
            return
        if self.pack_log:
            self.log.append((workflow, instance_id, *pack(write.log)))
        else:
            self.log.extend((workflow, instance_id, *e) for e in expand_entries(write.log))

    def in_order(self, sql: Statements) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """(statement, rows) for every kind that has rows, deletions first."""
        return [
            (statement, rows)
            for statement, rows in (
                (sql.wipe_steps, self.wipes),
                (sql.wipe_events, self.wipes),
                (sql.delete_step, self.deleted_steps),
                (sql.delete_event, self.deleted_events),
                (sql.insert_instance, self.created),
                (sql.upsert_instance, self.instances),
                (sql.upsert_step, self.steps),
                (sql.upsert_event, self.events),
                (sql.insert_log, self.log),
            )
            if rows
        ]

    @property
    def rows_written(self) -> int:
        return len(self.created) + len(self.instances) + len(self.steps) + len(self.events)


def settle(
    batch: list[Pending],
    outcome: dict[int, Any] | Exception,
    health: StoreHealth,
    observer: CommitObserver | None = None,
) -> None:
    """On the event loop: tell every caller of `batch` how its commit went. `outcome` is
    the batch's failure, or by position the creates left out (or that caller's own
    failure). `observer` hears of each committed write that logged or deleted something
    first."""
    if not batch:
        return
    if isinstance(outcome, Exception):
        health.record_failure(outcome)
    else:
        health.record_success()
        if observer is not None:
            _observe(batch, outcome, observer)
    for index, pending in enumerate(batch):
        result = outcome if isinstance(outcome, Exception) else outcome.get(index, set())
        if pending.done is not None:
            try:
                pending.done(result)
            except Exception:  # noqa: BLE001 - one caller's failure must not stop the others
                log.exception("settling a commit's caller failed")
            continue
        future = pending.future
        if future is None or future.done():
            continue
        if isinstance(result, Exception):
            future.set_exception(result)
        else:
            future.set_result(result)


def _observe(batch: list[Pending], outcome: dict[int, Any], observer: CommitObserver) -> None:
    for index, pending in enumerate(batch):
        skipped = outcome.get(index, ())
        if isinstance(skipped, Exception):
            continue
        for write in pending.writes:
            if (write.log or write.delete) and write.ref not in skipped:
                try:
                    observer(write)
                except Exception:  # noqa: BLE001 - a log line must not fail a commit
                    log.exception("observing a committed write failed")


def fan_out(soon: list[tuple[Write, WriteDone]], outcome: set[InstanceRef] | Exception) -> None:
    """Tell each write gathered by `write_soon` how the commit went, each caller as work of
    the loop's inline slices (celld/isolate/inline.py `call_first`), in order.

    A caller's `done` is a workflow run's continuation (its output gate released, the
    next step decided, JS's next turn queued): ~10-40 us each, so a group commit of a
    hundred runs told in one callback held the event loop for 1-5 ms, and a request that
    arrived meanwhile waited for all of it. Through the slices, the continuations share
    the slices' budget and give way to a request in flight like the runs' JS turns do;
    each still runs only after its commit landed, in the order of the batch and of the
    batches, and before any JS turn that was waiting for a slice (as when they all ran in
    the callback that told of the commit)."""
    turns = inline_turns()
    for write, done in soon:
        if isinstance(outcome, Exception):
            error: BaseException | None = outcome
        else:
            error = DuplicateInstance(write.ref) if write.ref in outcome else None
        turns.call_first(functools.partial(_tell, done, error))


def _tell(done: WriteDone, error: BaseException | None) -> None:
    try:
        done(error)
    except Exception:  # noqa: BLE001 - one caller's failure must not stop the others
        log.exception("settling a commit's caller failed")


class GroupCommitWrites:
    """The write side of the Store interface, for a store whose `_enqueue` queues a
    caller's share for its group commit and settles it (`settle`) once committed."""

    #: writes queued by `write_soon` in this pass of the event loop, not yet handed over
    _soon: list[tuple[Write, WriteDone]] | None = None
    #: told of every committed write that logged or deleted something (`settle`)
    on_committed: CommitObserver | None = None

    def _enqueue(self, pending: Pending) -> None:
        """Hand `pending` to the writer (raise StoreUnavailable if it cannot be)."""
        raise NotImplementedError

    async def _submit(self, pending: Pending) -> set[InstanceRef]:
        pending.future = asyncio.get_running_loop().create_future()
        self._enqueue(pending)
        return await pending.future

    def write_soon(self, write: Write, done: WriteDone) -> None:
        """Commit `write` like `write`, then call `done(None)` or `done(error)` on the event
        loop. Every write queued so in one pass of the loop goes to the writer as one
        share, at the end of the pass: one hand-over and one wake-up for all of them, and
        no task or future per caller (the step path's commit)."""
        if self._soon is None:
            self._soon = []
            asyncio.get_running_loop().call_soon(self._flush_soon)
        self._soon.append((write, done))

    def _flush_soon(self) -> None:
        soon, self._soon = self._soon or [], None
        if not soon:
            return  # flushed already (the store closed)
        pending = Pending(writes=[write for write, _ in soon])
        pending.done = lambda outcome: fan_out(soon, outcome)
        try:
            self._enqueue(pending)
        except Exception as error:  # noqa: BLE001 - every caller learns it
            fan_out(soon, error)

    async def write(self, write: Write) -> None:
        if await self._submit(Pending(writes=[write])):
            raise DuplicateInstance(write.ref)

    async def write_many(self, writes: list[Write]) -> set[InstanceRef]:
        """Commit several instances' changes in one transaction (createBatch); returns the
        refs whose creation was skipped because their id is taken."""
        return await self._submit(Pending(writes=writes))

    async def probe(self) -> None:
        await self._submit(Pending(probe=True))

    async def delete_expired(self, refs: list[InstanceRef], now_ms: int) -> None:
        await self._submit(Pending(expired=list(refs), now=now_ms))

    async def record_tick(self, workflow: str, expression: str, tick_ms: int) -> None:
        """Commit that `expression`'s tick at `tick_ms` is handled (never moves back)."""
        await self._submit(Pending(ticks=[(workflow, expression, tick_ms)]))
