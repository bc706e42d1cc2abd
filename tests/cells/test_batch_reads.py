"""Runs admitted together read their instances together (celld/cells/residency.py
`_load_together`, `Store.claim_many`): a burst of hibernated wake-ups reads each instance
once, in a few trips to the store's reader thread rather than two a wake-up, and a run
loaded so starts from the journal read with it; a read of a batch that fails costs its
members a reload each, never a wake-up.

Real isolates and a real SQLite file; the deadline is reached with the manual clock, and
the read fault is raised on the store's reader thread (`SqliteStore.read_fault`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from celld.cells.clock import ManualClock
from celld.cells.manager import CellSettings
from celld.cells.residency import LOAD_TOGETHER, Residency
from celld.server.service import Service
from tests.cells.test_wake_burst import (
    DUE,
    START,
    WINDOW,
    _after_steps,
    _create_sleepers,
    _eventually,
    _statuses,
)
from tests.inprocess import running_service


@asynccontextmanager
async def hibernated(
    tmp_path: Path, n: int
) -> AsyncIterator[tuple[Service, ManualClock, Any, Residency]]:
    """A service with `n` sleepers hibernated until `DUE` (the manual clock before it),
    its store and its residency."""
    clock = ManualClock(START)
    async with running_service(
        tmp_path / "state", cells=CellSettings(residency_ms=WINDOW), clock=clock
    ) as service:
        await _create_sleepers(service, n)
        assert service.cells is not None
        yield service, clock, service.store, service.cells.residency


async def _all_complete(service: Service, n: int) -> None:
    async def complete() -> bool:
        return (await _statuses(service)).get("complete", 0) == n

    await _eventually(service, complete, f"all {n} complete")
    assert await _after_steps(service) == n  # each ran past its sleep once


async def test_a_burst_reads_its_instances_and_journals_in_batches(tmp_path: Path) -> None:
    n = 300
    async with hibernated(tmp_path, n) as (service, clock, store, residency):
        claims, journals = store.claims, store.journal_reads
        loads, loaded = residency.batch_loads, residency.batch_loaded
        clock.set(DUE)
        await _all_complete(service, n)
        batches = residency.batch_loads - loads
        # every instance read once, by a read of its admission pass (a run admitted alone
        # too), which brought its journal: no run read its journal on its own
        assert store.claims - claims == residency.batch_loaded - loaded == n
        assert store.journal_reads == journals
        # most reads brought several: LOAD_TOGETHER at most, and the first admission pass
        # alone fills several (before: two trips to the reader thread a wake-up)
        assert n // LOAD_TOGETHER <= batches <= n // 3, batches


def read_refused() -> None:
    raise sqlite3.OperationalError("disk I/O error")


async def test_a_failed_batch_read_costs_a_reload_not_a_wake_up(tmp_path: Path) -> None:
    n = 120
    async with hibernated(tmp_path, n) as (service, clock, store, residency):
        refused: list[int] = []

        def refuse_the_first_batch() -> None:
            # (on the reader thread) the first read of the burst is a batch's claim
            if not refused:
                refused.append(residency.batch_loads)
                read_refused()

        loads, claims = residency.batch_loads, store.claims
        store.read_fault = refuse_the_first_batch
        clock.set(DUE)
        await _all_complete(service, n)
        store.read_fault = None
        # the refused read was a batch's (batches were under way when it ran); its
        # members were read again, each once, and every other instance once too
        assert refused and refused[0] > loads, "no batch read was refused"
        assert store.claims - claims == n


async def test_runs_beyond_the_run_queue_are_read_back_in_pages_and_batches(
    tmp_path: Path,
) -> None:
    """createBatch beyond the run queue's capacity: the runs left out are paged back in
    from the store a quarter of the queue at a time, and their instances read in batches
    (before: a page of a few refs every few runs, then two reads a run)."""
    n, capacity = 600, 40
    clock = ManualClock(START)
    async with running_service(
        tmp_path / "state",
        cells=CellSettings(queue_capacity=capacity, residency_ms=WINDOW),
        clock=clock,
    ) as service:
        cells = service.cells
        assert cells is not None
        store: Any = service.store
        residency = cells.residency
        claims, journals, pages = store.claims, store.journal_reads, cells.refill_pages
        loads, loaded = residency.batch_loads, residency.batch_loaded
        await _create_sleepers(service, n)  # (each createBatch is 100: most overflow)
        assert residency.queue.overflowed is False
        read_back = residency.batch_loaded - loaded
        # the held (just created) cells need no read; the rest were read once each, all
        # with their journals, in reads of several
        assert store.claims - claims == read_back >= n // 2
        assert store.journal_reads == journals
        assert residency.batch_loads - loads <= read_back // 2
        # the refill read the store's runnable index a quarter of the queue at a time (a
        # pass ends with a short page, and each createBatch that overflowed starts one)
        assert cells.refill_pages - pages <= read_back // (capacity // 4) + 2 * (n // 100)
        assert await _count_before_steps(service) == n


async def _count_before_steps(service: Any) -> int:
    rows = await service.store._fetch(
        "SELECT count(*) AS n FROM steps WHERE workflow = ? AND name = 'before' AND state = 'done'",
        ("script-workflow",),
    )
    return int(rows[0]["n"])
