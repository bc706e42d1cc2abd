"""A request never lands in an isolate that a neighbour is about to stop.

celld/isolate/worker_pool.py: when one request passes its CPU limit, its whole isolate
stops and every request in it fails. A loop of short jobs never stalls its isolate (each
slice yields the thread), so without more, a quick request could be handed to that
isolate just before it stops and fail with the neighbour's error. New requests avoid an
isolate once one of its requests has used more than `DOOMED_SHARE` of the limit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from celld.isolate.worker_pool import CPU_MESSAGE, DOOMED_SHARE, WorkerError, WorkerPool
from tests.inprocess import running_service

HOSTILE = Path(__file__).resolve().parents[1] / "projects" / "hostile"


async def _get(pool: WorkerPool, path: str) -> str:
    response = await pool.handle("GET", f"http://localhost{path}", [], b"")
    assert response.status == 200, response.body
    return response.body.decode()


async def _until_doomed(pool: WorkerPool, limit_ms: float) -> None:
    """Wait until some live request has used more than the doomed share of its limit."""
    for _ in range(600):
        if any(
            used > limit_ms * DOOMED_SHARE
            for slot in pool._slots  # noqa: SLF001 - the pool's own books, read only
            for used in slot.live.values()
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the runaway request never used half its CPU limit")


async def test_a_quick_request_goes_to_another_isolate_while_a_neighbour_runs_away(
    tmp_path: Path,
) -> None:
    # One JS thread: one isolate, so without the rule the quick request would share it.
    async with running_service(tmp_path / "state", HOSTILE, js_threads=1) as service:
        pool = service.pool
        assert pool is not None and len(pool._slots) == 1  # noqa: SLF001
        first = await _get(pool, "/isolate")
        runaway = asyncio.ensure_future(_get(pool, "/microtask-loop"))
        await _until_doomed(pool, pool.limits.cpu_ms)
        # The runaway's isolate still turns (its slices yield), yet it is avoided.
        answers = {await _get(pool, "/isolate") for _ in range(3)}
        assert first not in answers
        with pytest.raises(WorkerError) as stopped:
            await runaway
        assert stopped.value.message == CPU_MESSAGE
        assert await _get(pool, "/ping") == "pong"
