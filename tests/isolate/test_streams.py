"""Host streams (celld/isolate/streams.py): a pipe's back-pressure and endings, a source's
pieces, and body pieces crossing a real isolate's bridge both ways."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from celld.isolate.host import HostError, Later
from celld.isolate.isolate import Piece
from celld.isolate.streams import (
    HIGH_WATER_BYTES,
    READ_BYTES,
    STREAMS,
    Pipe,
    Source,
    StreamAborted,
)
from tests.jsharness import run_js_async

KIB = 1024


async def _collect(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in chunks])


async def test_a_pipe_answers_writes_only_while_it_has_room() -> None:
    pipe = Pipe(high_water=128 * KIB)
    piece = bytes(64 * KIB)
    assert pipe.write(piece) is None  # 64 KiB held: answered now
    assert pipe.write(piece) is None  # 128 KiB: still at the mark
    waiting = pipe.write(piece)  # 192 KiB: answered once drained
    assert isinstance(waiting, Later) and not waiting.settled
    reader = pipe.chunks()
    taken = await anext(reader)  # everything queued, at once
    assert len(taken) == 192 * KIB and pipe.queued == 0
    assert waiting.settled
    pipe.close()
    assert [chunk async for chunk in reader] == []


async def test_a_pipe_its_writer_aborts_fails_its_consumer_with_the_js_error() -> None:
    STREAMS.op_open({"p": "t-abort"})
    pipe = STREAMS.attach("t-abort")
    STREAMS.op_write({"p": "t-abort", "d": base64.b64encode(b"part").decode()})
    STREAMS.op_abort(
        {"p": "t-abort", "error": {"name": "TypeError", "message": "broke", "stack": "at x"}}
    )
    reader = pipe.chunks()
    assert await anext(reader) == b"part"
    with pytest.raises(StreamAborted) as caught:
        await anext(reader)
    assert str(caught.value) == "TypeError: broke" and caught.value.stack == "at x"
    error = caught.value.as_host_error("put")
    assert (error.js_name, str(error)) == ("TypeError", "put: broke")
    assert "t-abort" not in STREAMS.pipes


async def test_a_consumer_that_goes_away_fails_the_writes_now_and_later() -> None:
    pipe = Pipe(high_water=0)
    waiting = pipe.write(b"x")
    assert isinstance(waiting, Later)
    outcomes: list[Any] = []
    waiting.then(outcomes.append)
    pipe.cancel("the client went away")
    assert outcomes[0][0] == "e" and "client went away" in str(outcomes[0][1])
    with pytest.raises(HostError, match="client went away"):
        pipe.write(b"y")
    with pytest.raises(StreamAborted):  # a consumer still reading is told, not ended quietly
        await anext(pipe.chunks())


async def test_a_source_gives_pieces_of_at_most_read_bytes() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield bytes(READ_BYTES + 10)
        yield b"tail"

    closed: list[bool] = []

    async def close() -> None:
        closed.append(True)

    source = Source(chunks(), close, length=READ_BYTES + 14)
    assert len(await source.read() or b"") == READ_BYTES
    assert await source.read() == bytes(10)
    assert await source.read() == b"tail"
    assert await source.read() is None
    assert closed == [True]


async def test_a_source_taken_by_a_host_consumer_keeps_what_js_left() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"a" * (READ_BYTES + 3)
        yield b"b"

    sid = STREAMS.add_source(chunks())
    first = await STREAMS.op_read({"s": sid})
    assert isinstance(first, Piece) and len(first.data) == READ_BYTES
    taken = STREAMS.take_source(sid)
    assert await _collect(taken.chunks()) == b"aaab"
    with pytest.raises(HostError, match="no longer available"):
        await STREAMS.op_read({"s": sid})


async def test_pieces_cross_the_bridge_as_bytes_both_ways() -> None:
    """JS sends a body piece (requestBytes) and is answered with one (a Piece after the
    delivery's JSON): the bytes arrive exact, binary and all."""
    data = bytes(range(256)) * 300
    got: list[bytes] = []

    def echo(message: dict[str, Any]) -> Piece:
        got.append(base64.b64decode(message["d"]))
        return Piece(got[-1][::-1])

    result = await run_js_async(
        """
        const host = __celld_host;
        const bytes = new Uint8Array(76800);
        for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256;
        const answers = await Promise.all([
          host.requestBytes("t.echo", { p: "x" }, "d", bytes),
          host.requestBytes("t.echo", { p: "y" }, "d", bytes.subarray(0, 3)),
          host.request("t.plain", {}),
        ]);
        const back = __celld_web.base64ToBytes(answers[0]);
        return { length: back.length, first: back[0], last: back[back.length - 1],
                 small: Array.from(__celld_web.base64ToBytes(answers[1])), plain: answers[2] };
        """,
        ops={"t.echo": echo, "t.plain": lambda m: "a\u0000b"},
    )
    assert got == [data, data[:3]]
    assert result == {"length": 76800, "first": 255, "last": 0, "small": [2, 1, 0],
                      "plain": "a\u0000b"}  # fmt: skip


async def test_a_js_stream_pumped_to_a_pipe_arrives_whole_and_in_order() -> None:
    done = asyncio.Event()
    received: list[bytes] = []

    async def consume(message: dict[str, Any]) -> None:
        pipe = STREAMS.attach(message["p"])
        received.append(await _collect(pipe.chunks()))
        done.set()

    await run_js_async(
        """
        const web = __celld_web;
        let n = 0;
        const stream = new ReadableStream({
          pull(controller) {
            if (n === 40) controller.close();
            else controller.enqueue(new Uint8Array(50000).fill(n++));
          },
        });
        const id = web.openPipe();
        __celld_host.notify("t.consume", { p: id });
        await web.pumpToHost(id, stream, null);
        """,
        ops={"t.consume": consume},
    )
    await asyncio.wait_for(done.wait(), 30)
    expected = b"".join(bytes([n]) * 50000 for n in range(40))
    assert received == [expected]
    assert len(expected) > HIGH_WATER_BYTES  # so the pump had to wait for room
