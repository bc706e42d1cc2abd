"""celld/server/limits.py's BodyReader: a request body read from ASGI `receive` within its
size limit and its read timeout (the timeout runs around the await in the request's own
task: a body already received is read without a task or a pass of the loop of its own)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from celld.server.limits import BodyReader, BodyTimeout, BodyTooLarge, ClientGone


def _receiver(messages: list[dict[str, Any]], stall: asyncio.Event | None = None) -> Any:
    async def receive() -> dict[str, Any]:
        if not messages:
            assert stall is not None
            await stall.wait()  # a client that sends no more
        return messages.pop(0)

    return receive


async def test_a_body_in_parts_is_read_whole() -> None:
    parts = [
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
    ]
    reader = BodyReader(_receiver(parts))
    assert await reader.read_all() == b"abcd"
    assert reader.failure is None and reader.done


async def test_a_client_that_stops_sending_is_cut_off_at_the_read_timeout() -> None:
    never = asyncio.Event()
    parts = [{"type": "http.request", "body": b"ab", "more_body": True}]
    reader = BodyReader(_receiver(parts, never), timeout=0.05)
    with pytest.raises(BodyTimeout):
        await reader.read_all()
    assert isinstance(reader.failure, BodyTimeout)
    # the timeout ended only the read: the task that read goes on (not cancelled)
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_too_large_and_a_client_gone_are_failures_of_their_own() -> None:
    big = BodyReader(_receiver([{"type": "http.request", "body": b"x" * 9}]), limit=8)
    with pytest.raises(BodyTooLarge):
        await big.read_all()
    gone = BodyReader(_receiver([{"type": "http.disconnect"}]))
    with pytest.raises(ClientGone):
        await gone.read_all()
    assert isinstance(gone.failure, ClientGone)
