"""A Worker request reaching an idle isolate turns on the event loop, and a long one moves.

celld/isolate/worker_pool.py (`_may_inline`): a short request on an isolate that serves
nothing else runs its turn right where it is handed over, without the crossing to the
isolate's JS thread and back. Such a turn is stopped at the inline limit; then the
isolate is replaced, the request starts over on a JS thread (where its CPU limit, not the
loop's, stops it), and the Worker's turns stay there.

A turn run on the loop is seen as such without a clock: `WorkerPool.handle` then finishes
without ever suspending (one `send` of its coroutine returns the answer), which a turn on
a JS thread cannot do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from celld.isolate.outbound import OUTGOING_FENCE
from celld.isolate.worker_pool import CPU_MESSAGE, WireResponse, WorkerError, WorkerPool
from celld.store.lease import Fence, Lease
from tests.inprocess import running_service

HOSTILE = Path(__file__).resolve().parents[1] / "projects" / "hostile"


def _at_once(request: Coroutine[Any, Any, WireResponse]) -> WireResponse | None:
    """The answer if `request` finished without suspending; else None (and it is closed)."""
    try:
        request.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    request.close()
    return None


def _request(pool: WorkerPool, path: str) -> Coroutine[Any, Any, WireResponse]:
    return pool.handle("GET", f"http://localhost{path}", [], b"")


async def _an_inline_answer(pool: WorkerPool, path: str) -> WireResponse:
    """Send `path` until one answer comes on the loop (the isolate's first turns, its
    setup among them, may cost more than the inline threshold until their peak decays)."""
    for _ in range(200):
        answer = _at_once(_request(pool, path))
        if answer is not None:
            return answer
        await _request(pool, path)  # (the closed one was withdrawn; let the isolate settle)
    raise AssertionError(f"{path} never turned on the event loop")


async def test_quick_requests_turn_on_the_loop_and_a_runaway_moves_to_a_js_thread(
    tmp_path: Path,
) -> None:
    async with running_service(tmp_path / "state", HOSTILE, js_threads=1) as service:
        pool = service.pool
        assert pool is not None
        for _ in range(40):  # the first turns (setup, the first request) cost more
            await _request(pool, "/ping")
        answer = await _an_inline_answer(pool, "/ping")
        assert (answer.status, answer.body) == (200, b"pong")
        assert not pool._long_turns  # noqa: SLF001 - the pool's own books, read only

        # A CPU-bound request reaches the idle isolate on the loop too; the loop stops
        # it at the inline limit and it starts over on a JS thread, where its CPU limit
        # (2 s in this project) ends it with Cloudflare's error.
        with pytest.raises(WorkerError) as stopped:
            await _request(pool, "/spin")
        assert stopped.value.message == CPU_MESSAGE
        assert pool._long_turns  # noqa: SLF001

        # The Worker's turns now stay on JS threads: nothing answers without a crossing.
        for _ in range(20):
            assert _at_once(_request(pool, "/ping")) is None
        assert (await _request(pool, "/ping")).body == b"pong"


async def test_requests_in_flight_together_turn_on_js_threads(tmp_path: Path) -> None:
    """Turns on the loop are for a lone request: with another request in flight, a turn
    handed over there would run alone where a JS thread takes several requests' messages
    in one turn (bench/PROFILE.md, "Worker turns on the loop under concurrent load")."""
    async with running_service(tmp_path / "state", HOSTILE, js_threads=2) as service:
        pool = service.pool
        assert pool is not None and pool.size == 2  # the other request has its own isolate
        for _ in range(40):
            await _request(pool, "/ping")
        await _an_inline_answer(pool, "/ping")

        # (a request that waits 300 ms on a timer; its fetch fails at once and is caught)
        waiting = asyncio.ensure_future(_request(pool, "/fetch-and-leave?url=http://127.0.0.1:9/"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        away = pool.turns[1]
        for _ in range(20):
            assert _at_once(_request(pool, "/ping")) is None
        assert (await _request(pool, "/ping")).body == b"pong"
        assert pool.turns[1] > away

        assert (await waiting).body == b"left"
        answer = await _an_inline_answer(pool, "/ping")
        assert answer.body == b"pong"


async def test_what_a_turn_on_the_loop_starts_does_not_inherit_the_posters_context(
    tmp_path: Path,
) -> None:
    # A request posted from a task that carries an outgoing fence (a workflow's service
    # binding call does) turns on the loop inside that task; the fetch its turn starts
    # must not take that fence with it, as it would not from a turn on a JS thread.
    reached = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the request's head was written
        reached.set()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    lapsed = Fence(Lease(margin_s=1.0), 0)
    assert not lapsed.allows_effects()
    try:
        async with running_service(tmp_path / "state", HOSTILE, js_threads=1) as service:
            pool = service.pool
            assert pool is not None
            await _an_inline_answer(pool, "/ping")
            token = OUTGOING_FENCE.set(lapsed)
            try:
                request = asyncio.ensure_future(
                    _request(pool, f"/fetch-and-leave?url=http://127.0.0.1:{port}/")
                )
                await asyncio.sleep(0)  # the task posts it and its first turn runs
            finally:
                OUTGOING_FENCE.reset(token)
            turned = pool._slots[0].inline_batch  # noqa: SLF001 - the pool's own books
            assert turned is not None and "/fetch-and-leave" in turned[0]["request"]["url"]
            await asyncio.wait_for(reached.wait(), 60)
            assert (await request).body == b"left"
    finally:
        server.close()


async def _poll_until(pool: WorkerPool, instance_id: str, status: bytes) -> None:
    for _ in range(400):
        if (await _request(pool, f"/wf-status?id={instance_id}")).body == status:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{instance_id} never reached {status!r}")


async def test_a_status_poll_crosses_to_no_js_thread_and_an_unknown_id_still_rejects_at_get(
    tmp_path: Path,
) -> None:
    """`get(id)` then `status()`: the request's first turn runs on the loop, and so do the
    answers' turns, because all it sent before them were reads (it could start over).
    Counted from the pool's turns, not timed: a crossing is a turn on a JS thread."""
    async with running_service(tmp_path / "state", HOSTILE, js_threads=1) as service:
        pool = service.pool
        assert pool is not None
        assert (await _request(pool, "/wf-create?id=polled&kind=wait")).body == b"polled"
        await _poll_until(pool, "polled", b"waiting")
        rounds = []
        for _ in range(20):  # (a round where a turn's CPU peaked above the inline limit
            # sends the next turns to the thread until the peak decays: another round)
            here, away = pool.turns
            for _ in range(10):
                assert (await _request(pool, "/wf-status?id=polled")).body == b"waiting"
            rounds.append((pool.turns[0] - here, pool.turns[1] - away))
            if rounds[-1][1] == 0:
                break
        # two turns a poll (the request, the answer to get, which carried the status that
        # status() then used), none of them on a thread; before, three, and the two answers
        # each crossed to it and back
        assert rounds[-1] == (20, 0), rounds

        # Something else heard from outside between get() and status(): status() asks
        # (four turns: the request, get, the other get, status)
        assert (await _request(pool, "/wf-create?id=other&kind=wait")).body == b"other"
        await _poll_until(pool, "other", b"waiting")
        here = pool.turns[0]
        for _ in range(10):
            answer = await _request(pool, "/wf-status-after-get?id=polled&other=other")
            assert answer.body == b"waiting"
        assert pool.turns[0] - here == 40

        # An unknown id still rejects at get(), before any status() is asked for
        with pytest.raises(WorkerError) as unknown:
            await _request(pool, "/wf-status?id=nobody")
        assert "instance.not_found" in unknown.value.message


async def test_a_long_turn_after_reads_starts_over_on_a_thread_one_after_a_create_does_not(
    tmp_path: Path,
) -> None:
    """A turn after a create (an effect) stays on the JS thread however long it is; one
    after reads only runs on the loop, is stopped there at the inline limit, and its
    request starts over on a JS thread (doing its reads again) and answers."""
    async with running_service(tmp_path / "state", HOSTILE, js_threads=1) as service:
        pool = service.pool
        assert pool is not None
        assert (await _request(pool, "/wf-create?id=first&kind=wait")).body == b"first"
        await _poll_until(pool, "first", b"waiting")
        for _ in range(40):  # the isolate's first turns' CPU peak decays: turns run inline
            await _request(pool, "/wf-status?id=first")
        assert _at_once(_request(pool, "/ping")) is not None
        away = pool.turns[1]
        answer = await _request(pool, "/wf-create?id=once&kind=wait&spin=3000000")
        # created once (a second create of the id would have failed the request)
        assert answer.body == b"once"
        assert pool.turns[1] > away
        assert not pool._long_turns  # noqa: SLF001 - the pool's own books, read only
        await _poll_until(pool, "once", b"waiting")
        for _ in range(40):  # the long turn's CPU peak decays
            await _request(pool, "/wf-status?id=once")

        answer = await _request(pool, "/wf-status?id=once&spin=3000000")
        assert answer.body == b"waiting"
        assert pool._long_turns  # noqa: SLF001 - stopped on the loop, answered from a thread
