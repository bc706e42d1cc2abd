"""The store interface the cells use.

Written so a PostgreSQL store can implement it later: every write is one batch of
instance changes committed atomically, reads never hold a transaction open while
JS runs, and wake-ups are found through an index on each instance's next deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from celld.engine.state import Changes, EventRecord, InstanceState, StepRecord


@dataclass(frozen=True)
class InstanceRef:
    workflow: str
    id: str


@dataclass(frozen=True)
class Loaded:
    """Everything needed to rebuild an instance's machine."""

    state: InstanceState
    steps: list[StepRecord]
    events: list[EventRecord]


@dataclass(frozen=True)
class Write:
    """One instance's changes plus the derived fields the store indexes."""

    ref: InstanceRef
    changes: Changes
    next_wake: int | None
    runnable: bool  # queued or running: must be resumed after a restart


class DuplicateInstance(Exception):
    """An instance with this id already exists (and is retained)."""


class Store(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def write(self, write: Write) -> None:
        """Commit one instance's changes durably; many callers share one commit."""
        ...

    async def write_many(self, writes: list[Write]) -> None:
        """Commit several instances' changes in one transaction (createBatch)."""
        ...

    async def load(self, ref: InstanceRef) -> Loaded | None: ...
    async def exists(self, ref: InstanceRef) -> bool: ...
    async def retained_until(self, ref: InstanceRef) -> tuple[bool, int | None]: ...
    async def existing(self, workflow: str, ids: list[str]) -> set[str]: ...
    async def due(
        self, before_ms: int, limit: int, after: tuple[int, str, str] | None = None
    ) -> list[tuple[InstanceRef, int]]:
        """Instances whose next deadline is before `before_ms`, earliest first."""
        ...

    async def runnable(self) -> list[InstanceRef]: ...
    async def expired(self, now_ms: int, limit: int) -> list[InstanceRef]: ...
    async def delete(self, refs: list[InstanceRef]) -> None: ...
    async def counts(self) -> dict[str, int]: ...
