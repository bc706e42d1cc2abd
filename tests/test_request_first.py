"""A request a client waits on goes before the workflows' inline slices, within bounds.

celld/isolate/inline.py: while a request is in flight (`hold`), a slice due waits for it
(until `release`, or `HOLD_S` at most, never past its credit). celld/isolate/host.py: a
Worker's turns start on their JS thread at once and hold the slices while they run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from celld.isolate.inline import inline_turns
from celld.isolate.worker_pool import WorkerError
from tests.inprocess import call, params, running_service, wait_for


async def _passes(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_held_slice_runs_once_the_request_is_released() -> None:
    turns = inline_turns()
    ran: list[str] = []
    turns.hold()
    turns.call(lambda: ran.append("turn"))
    await _passes(5)
    assert ran == []  # waiting for the request
    turns.release()
    await _passes(3)
    assert ran == ["turn"]
    assert turns.held == 0


async def test_a_request_never_released_delays_a_slice_only_for_a_while() -> None:
    turns = inline_turns()
    ran = asyncio.Event()
    turns.hold()
    try:
        turns.call(ran.set)
        await asyncio.wait_for(ran.wait(), timeout=5)
        # and the slices after it as well, however many
        for _ in range(20):
            again = asyncio.Event()
            turns.call(again.set)
            await asyncio.wait_for(again.wait(), timeout=5)
    finally:
        turns.release()


async def test_worker_requests_leave_no_hold_behind_while_workflows_run(tmp_path: Path) -> None:
    async with running_service(tmp_path / "state") as service:
        assert service.pool is not None
        turns = inline_turns()
        ids = [f"w{i}" for i in range(5)]
        for instance_id in ids:
            await call(
                service, "long-workflow", "create", id=instance_id, params=params({"steps": 30})
            )
        ok = service.pool.handle(
            "POST",
            "http://localhost/order?id=o1",
            [("content-type", "application/json")],
            b'{"item": "tea", "count": 1}',
        )
        broken = service.pool.handle(
            "POST", "http://localhost/order?id=o2", [("content-type", "application/json")], b"{"
        )
        answers = await asyncio.gather(ok, broken, return_exceptions=True)
        assert answers[0].status == 200  # type: ignore[union-attr]
        assert orjson.loads(answers[0].body) == {"id": "o1"}  # type: ignore[union-attr]
        assert isinstance(answers[1], WorkerError)  # the Worker threw: request.json()
        final = await wait_for(service, "long-workflow", ids, {"complete"})
        assert {orjson.loads(final[i]["output"])["total"] for i in ids} == {465}
        await _passes(3)
        assert turns.held == 0
