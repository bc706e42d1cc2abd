"""Bodies that stream: server-sent events, generated responses, request bodies read in JS,
R2 objects streamed in and out, a body that fails after its head.

These run against the streams project (tests/projects/streams, also celld's end-to-end
project), started on the session's kind of target; CELLD_COMPAT_STREAMS_URL reuses a running
server. Every request body sent here has a Content-Length (workerd's R2 put refuses a stream
of unknown length, a declared difference of compat/scenarios/test_r2.py).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import httpx
import pytest

from compat.targets import REPO, Target, connect

PROJECT = REPO / "tests" / "projects" / "streams"
MIB = 1024 * 1024
BLOCK = bytes((i * 7) & 255 for i in range(64 * 1024))
#: (wrangler dev compresses what a client accepts compressed; then no length is sent)
IDENTITY = {"accept-encoding": "identity"}


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    server = connect(
        os.environ.get("CELLD_COMPAT_TARGET", "celld"),
        tmp_path_factory.mktemp("compat-streams") / "state",
        PROJECT,
        "CELLD_COMPAT_STREAMS_URL",
    )
    try:
        yield server
    finally:
        server.close()


def _events(lines: Iterator[str], count: int) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if fields:
                found.append((fields.get("id", ""), fields.get("data", "")))
                fields = {}
                if len(found) == count:
                    break
            continue
        name, _, value = line.partition(": ")
        fields[name] = value
    return found


def _pattern_sha(total: int) -> str:
    digest = hashlib.sha256()
    for _ in range(total // len(BLOCK)):
        digest.update(BLOCK)
    return digest.hexdigest()


def _random(total: int, seed: bytes) -> bytes:
    return b"".join(
        hashlib.sha512(seed + i.to_bytes(4, "big")).digest() for i in range(total // 64)
    )


def test_server_sent_events_arrive_in_order(streams: Target) -> None:
    """A ReadableStream response of server-sent events: every event, in order, chunked."""
    with streams.client.stream("GET", "/sse", params={"id": "c1", "n": 4, "ms": 30}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in response.headers
        received = _events(response.iter_lines(), 5)
    assert received == [(str(n), f"event {n} of c1") for n in range(4)]


def test_events_arrive_while_the_stream_stays_open(streams: Target) -> None:
    """Two events, then the stream stays open for an hour: both reach the client first."""
    params = {"id": "c2", "n": 2, "ms": 20, "hold": 1}
    with (
        httpx.Client(base_url=streams.base_url, timeout=30) as client,
        client.stream("GET", "/sse", params=params) as response,
    ):
        lines = response.iter_lines()  # (dropped half-read, it would close the connection)
        assert _events(lines, 2) == [("0", "event 0 of c2"), ("1", "event 1 of c2")]


def test_a_generated_stream_arrives_whole(streams: Target) -> None:
    """8 MiB pulled from a ReadableStream 64 KiB at a time: chunked, every byte in place."""
    with streams.client.stream("GET", "/generate", params={"mb": 8}) as response:
        assert response.status_code == 200
        assert "content-length" not in response.headers
        body = response.read()
    assert (len(body), hashlib.sha256(body).hexdigest()) == (8 * MIB, _pattern_sha(8 * MIB))


def test_a_large_bytes_body_keeps_its_length(streams: Target) -> None:
    """A 2 MiB Uint8Array body is sent with its Content-Length."""
    response = streams.request("GET", "/bytes", params={"mb": 2}, headers=IDENTITY)
    assert response.headers["content-length"] == str(2 * MIB)
    assert len(response.content) == 2 * MIB


def test_a_request_body_is_read_as_a_stream(streams: Target) -> None:
    """request.body read chunk by chunk in JS: every byte arrives, in several chunks."""
    body = _random(MIB, b"count")
    answer = streams.request("POST", "/count", content=body).json()
    assert answer["total"] == MIB
    assert answer["chunks"] > 1


def test_a_request_body_relayed_through_js(streams: Target) -> None:
    """request.body read in JS and enqueued into the response stream, byte for byte."""
    body = _random(MIB, b"relay")
    response = streams.request("POST", "/relay", content=body)
    assert response.status_code == 200
    assert response.content == body


def test_a_request_body_into_r2_and_back(streams: Target) -> None:
    """R2.put(request.body), then R2.get's body as the response (untouched: with its
    length and etag) and read through JS (chunked): the same bytes each way."""
    body = _random(3 * MIB, b"r2")
    md5 = hashlib.md5(body).hexdigest()
    stored = streams.request("PUT", "/r2/put", params={"key": "compat-big"}, content=body)
    assert stored.json() == {"size": 3 * MIB, "etag": md5}
    direct = streams.request("GET", "/r2/get", params={"key": "compat-big"}, headers=IDENTITY)
    assert direct.headers["content-length"] == str(3 * MIB)
    assert direct.headers["etag"] == f'"{md5}"'
    assert direct.content == body
    relayed = streams.request(
        "GET", "/r2/get", params={"key": "compat-big", "via": "js"}, headers=IDENTITY
    )
    assert "content-length" not in relayed.headers
    assert relayed.content == body
    counted = streams.request("GET", "/r2/count", params={"key": "compat-big"}).json()
    assert counted == {"total": 3 * MIB, "size": 3 * MIB}
    assert streams.request("GET", "/r2/text", params={"key": "compat-big"}).status_code == 200


def test_a_stream_that_fails_after_its_head(streams: Target) -> None:
    """The head (200) is sent when the handler returns; the stream's error (after its first
    parts and a pause) then cuts the body short: the client sees an incomplete chunked
    body, not a 500."""
    with (
        httpx.Client(base_url=streams.base_url, timeout=30) as client,
        client.stream("GET", "/broken") as response,
    ):
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()
