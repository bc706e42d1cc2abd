"""What the SQL stores' group commits share: a caller's share of a batch, the rows a batch
gathers by kind, and telling every caller of a batch how it went."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from celld.store.base import DuplicateInstance, InstanceRef, Write
from celld.store.health import StoreHealth
from celld.store.rows import event_row, step_row


@dataclass
class Pending:
    """One caller's share of a group commit."""

    writes: list[Write] = field(default_factory=list)
    expired: list[InstanceRef] = field(default_factory=list)  # delete if retention is over
    now: int = 0
    probe: bool = False
    ticks: list[tuple[str, str, int]] = field(default_factory=list)  # (workflow, cron, ms)
    future: asyncio.Future[set[InstanceRef]] | None = None


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
    log: list[tuple[Any, ...]] = field(default_factory=list)  # instance event log entries

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
        self.steps.extend(step_row(workflow, instance_id, s) for s in changes.steps)
        self.events.extend(event_row(workflow, instance_id, e) for e in changes.events)
        self.log.extend((workflow, instance_id, *entry) for entry in write.log)

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


def settle(batch: list[Pending], outcome: dict[int, Any] | Exception, health: StoreHealth) -> None:
    """On the event loop: tell every caller of `batch` how its commit went. `outcome` is
    the batch's failure, or by position the creates left out (or that caller's own
    failure)."""
    if not batch:
        return
    if isinstance(outcome, Exception):
        health.record_failure(outcome)
    else:
        health.record_success()
    for index, pending in enumerate(batch):
        future = pending.future
        if future is None or future.done():
            continue
        result = outcome if isinstance(outcome, Exception) else outcome.get(index, set())
        if isinstance(result, Exception):
            future.set_exception(result)
        else:
            future.set_result(result)


class GroupCommitWrites:
    """The write side of the Store interface, for a store whose `_submit` queues a
    caller's share for its group commit and returns that caller's outcome."""

    async def _submit(self, pending: Pending) -> set[InstanceRef]:
        raise NotImplementedError

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
