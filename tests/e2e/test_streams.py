"""Bodies stream both ways through a real `celld run`, read by a real HTTP client:
server-sent events arrive as the Worker enqueues them, large responses and uploads pass
with the server's memory flat, R2 takes and gives streams, `fetch()` streams an outside
server's response, and a slow client slows the Worker's stream down.

The server runs one isolate (`--threads 1`), so the Worker's module state (what each
stream produced, which were cancelled: GET /state) is shared by every request."""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS
from tests.e2e.hostile import ping, rss_bytes

MB = 1024 * 1024
#: What the Worker's generated streams hold: byte i is (i * 7) & 255, in 64 KiB blocks.
BLOCK = bytes((i * 7) & 255 for i in range(64 * 1024))
#: How far above its resting RSS the server may go while a body streams through it.
RSS_ALLOWANCE = 48 * MB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(
        PROJECTS / "streams", tmp_path_factory.mktemp("streams") / "s", args=("--threads", "1")
    )
    celld.start()
    yield celld
    celld.stop()


# -- an outside server for fetch() -------------------------------------------------------------


class _Upstream(BaseHTTPRequestHandler):
    """GET /data?mb=N: N MiB of the generated pattern, written in 64 KiB blocks (with a
    Content-Length); POST /sha: the sha256 and length of the body it was sent."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        mb = int(self.path.split("mb=")[1])
        self.send_response(200)
        self.send_header("content-type", "application/octet-stream")
        self.send_header("content-length", str(mb * MB))
        self.end_headers()
        for _ in range(mb * MB // len(BLOCK)):
            self.wfile.write(BLOCK)

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        digest = hashlib.sha256()
        size = 0
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                length = int(self.rfile.readline().split(b";")[0], 16)
                if length == 0:
                    self.rfile.readline()
                    break
                data = self.rfile.read(length)
                self.rfile.readline()
                digest.update(data)
                size += len(data)
        else:
            left = int(self.headers.get("content-length", "0"))
            while left:
                data = self.rfile.read(min(left, MB))
                digest.update(data)
                size += len(data)
                left -= len(data)
        chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        body = json.dumps({"sha256": digest.hexdigest(), "size": size, "chunked": chunked})
        body = body.encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}"
    http.shutdown()
    http.server_close()


# -- helpers ---------------------------------------------------------------------------------


def pattern_sha256(total: int) -> str:
    digest = hashlib.sha256()
    for _ in range(total // len(BLOCK)):
        digest.update(BLOCK)
    digest.update(BLOCK[: total % len(BLOCK)])
    return digest.hexdigest()


def random_blocks(total: int, seed: bytes) -> Iterator[bytes]:
    """`total` pseudo-random bytes (the same for the same seed), 1 MiB at a time."""
    block = hashlib.sha512(seed).digest() * (MB // 64)
    for index in range(total // MB):
        yield hashlib.sha256(seed + index.to_bytes(4, "big")).digest() + block[32:]


class Peak:
    """The server's resting RSS and the most it reached while sampled."""

    def __init__(self, server: CelldServer) -> None:
        self.server = server
        for _ in range(3):
            ping(server)
        self.baseline = rss_bytes(server)
        self.peak = self.baseline

    def sample(self) -> None:
        self.peak = max(self.peak, rss_bytes(self.server))

    def check(self, body_size: int) -> None:
        grown = self.peak - self.baseline
        assert grown < RSS_ALLOWANCE, (
            f"the server grew by {grown // MB} MiB while a {body_size // MB} MiB body streamed"
        )


def read_streamed(response: httpx.Response, peak: Peak, every: int = 4 * MB) -> tuple[int, str]:
    """Read a response to its end, sampling the server's RSS every `every` bytes; its size
    and sha256."""
    digest = hashlib.sha256()
    size = 0
    next_sample = every
    for chunk in response.iter_bytes():
        digest.update(chunk)
        size += len(chunk)
        if size >= next_sample:
            peak.sample()
            next_sample += every
    return size, digest.hexdigest()


def sampling(source: Iterator[bytes], peak: Peak, digest: Any) -> Callable[[], Iterator[bytes]]:
    def body() -> Iterator[bytes]:
        for block in source:
            digest.update(block)
            peak.sample()
            yield block

    return body


def state(server: CelldServer, stream_id: str) -> dict[str, Any]:
    return dict(server.get("/state", params={"id": stream_id}).json())


def events(lines: Iterator[str], count: int) -> list[tuple[str, str]]:
    """The first `count` server-sent events: (id, data)."""
    found: list[tuple[str, str]] = []
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if fields:
                found.append((fields.get("id", ""), fields.get("data", "")))
                fields = {}
                if len(found) == count:
                    return found
            continue
        name, _, value = line.partition(": ")
        fields[name] = value
    return found


# -- server-sent events ------------------------------------------------------------------------


def test_server_sent_events_arrive_in_order_as_they_are_enqueued(server: CelldServer) -> None:
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("GET", "/sse", params={"id": "sse-a", "n": 5, "ms": 50}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert "content-length" not in response.headers  # a stream: chunked
        received = events(response.iter_lines(), 6)  # to the stream's end
    assert received == [(str(n), f"event {n} of sse-a") for n in range(5)]


def test_the_first_event_arrives_while_the_stream_is_still_open(server: CelldServer) -> None:
    """The stream sends two events and then stays open for an hour: the client reads both
    (a server that held the body until its end would send nothing), then leaves, and the
    Worker's stream is cancelled."""
    params = {"id": "sse-held", "n": 2, "ms": 20, "hold": 1}
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("GET", "/sse", params=params) as response,
    ):
        # (Held in a name: a line iterator dropped half-read closes the connection.)
        lines = response.iter_lines()
        received = events(lines, 2)
        assert received == [("0", "event 0 of sse-held"), ("1", "event 1 of sse-held")]
        assert state(server, "sse-held")["cancelled"] is False
    server.wait_for(lambda: state(server, "sse-held")["cancelled"])
    ping(server)


# -- large bodies, memory flat -------------------------------------------------------------------


def test_a_200_mb_streamed_response_passes_with_memory_flat(server: CelldServer) -> None:
    total = 200 * MB
    peak = Peak(server)
    with (
        httpx.Client(base_url=server.url, timeout=120) as client,
        client.stream("GET", "/generate", params={"mb": 200}) as response,
    ):
        assert response.status_code == 200
        size, sha = read_streamed(response, peak)
    assert size == total
    assert sha == pattern_sha256(total)
    peak.check(total)


def test_a_large_bytes_response_streams_too(server: CelldServer) -> None:
    """A 50 MiB Uint8Array body (not a stream) goes out in pieces, with its length."""
    with httpx.Client(base_url=server.url, timeout=120) as client:
        response = client.get("/bytes", params={"mb": 50})
    assert response.status_code == 200
    assert response.headers["content-length"] == str(50 * MB)
    body = response.content
    assert len(body) == 50 * MB
    assert body[4096 * 7] == 7 and body[1] == 0


def test_a_request_body_reaches_js_as_it_arrives(server: CelldServer) -> None:
    """The Worker reads the first megabyte while the client has not sent the rest."""
    first_seen = threading.Event()

    def body() -> Iterator[bytes]:
        yield bytes(MB)
        server.wait_for(lambda: state(server, "upload-a")["seen"] >= MB)
        first_seen.set()
        yield bytes(3 * MB)

    with httpx.Client(base_url=server.url, timeout=60) as client:
        response = client.post("/count", params={"id": "upload-a"}, content=body())
    assert first_seen.is_set()
    assert response.json()["total"] == 4 * MB


def test_a_request_body_echoed_back_streams_both_ways(server: CelldServer) -> None:
    """The Worker relays the request body into its response piece by piece while the
    client is still sending it (a client that sends and reads at once: one that sent its
    whole body first would wait on a full socket, as with any server that streams)."""
    digest = hashlib.sha256()
    peak = Peak(server)
    total = 64 * MB
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    sock.sendall(f"POST /relay HTTP/1.1\r\nHost: x\r\nContent-Length: {total}\r\n\r\n".encode())

    def send() -> None:
        for block in random_blocks(total, b"echo"):
            digest.update(block)
            sock.sendall(block)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    response = http.client.HTTPResponse(sock)
    response.begin()
    assert response.status == 200
    echoed = hashlib.sha256()
    size = 0
    while chunk := response.read(MB):
        echoed.update(chunk)
        size += len(chunk)
        peak.sample()
    sender.join(60)
    sock.close()
    assert (size, echoed.hexdigest()) == (total, digest.hexdigest())
    peak.check(total)


# -- R2 ----------------------------------------------------------------------------------------


def test_a_100_mb_request_body_streams_into_r2_and_back(server: CelldServer) -> None:
    total = 100_000_000 // MB * MB  # 95 MiB: under the 100 MB request limit
    digest = hashlib.sha256()
    peak = Peak(server)
    with httpx.Client(base_url=server.url, timeout=180) as client:
        stored = client.put(
            "/r2/put",
            params={"key": "big"},
            content=sampling(random_blocks(total, b"r2"), peak, digest)(),
        )
        assert stored.status_code == 200, stored.text
        assert stored.json()["size"] == total
        for via in ("host", "js"):
            with client.stream("GET", "/r2/get", params={"key": "big", "via": via}) as response:
                assert response.status_code == 200
                size, sha = read_streamed(response, peak)
            assert (via, size, sha) == (via, total, digest.hexdigest())
    peak.check(total)
    incoming = server.state / "r2" / "streams-bucket" / "incoming"
    assert not list(incoming.iterdir())  # no half-written body left behind


def test_r2_put_of_a_js_stream_and_reading_it_in_js(server: CelldServer) -> None:
    total = 48 * MB
    peak = Peak(server)
    with httpx.Client(base_url=server.url, timeout=180) as client:
        stored = client.post("/r2/put-generated", params={"key": "generated", "mb": 48})
        assert stored.status_code == 200, stored.text
        assert stored.json()["size"] == total
        peak.sample()
        counted = client.get("/r2/count", params={"key": "generated"}).json()
        assert counted == {"total": total, "size": total}
        with client.stream("GET", "/r2/get", params={"key": "generated"}) as response:
            size, sha = read_streamed(response, peak)
    assert (size, sha) == (total, pattern_sha256(total))
    peak.check(total)


# -- fetch() -----------------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["host", "js"])
def test_fetch_streams_an_outside_response(server: CelldServer, upstream: str, via: str) -> None:
    total = 150 * MB
    peak = Peak(server)
    params = {"url": f"{upstream}/data?mb=150", "via": via}
    with (
        httpx.Client(base_url=server.url, timeout=180) as client,
        client.stream("GET", "/proxy", params=params) as response,
    ):
        assert response.status_code == 200
        size, sha = read_streamed(response, peak)
    assert (size, sha) == (total, pattern_sha256(total))
    peak.check(total)


def test_fetch_response_read_in_js_piece_by_piece(server: CelldServer, upstream: str) -> None:
    peak = Peak(server)
    with httpx.Client(base_url=server.url, timeout=180) as client:
        counted = client.get("/proxy-count", params={"url": f"{upstream}/data?mb=100"})
    peak.sample()
    assert counted.json() == {"total": 100 * MB}
    peak.check(100 * MB)


@pytest.mark.parametrize("via", ["host", "js"])
def test_fetch_streams_a_request_body_out(server: CelldServer, upstream: str, via: str) -> None:
    total = 64 * MB
    digest = hashlib.sha256()
    peak = Peak(server)
    with httpx.Client(base_url=server.url, timeout=180) as client:
        response = client.post(
            "/forward",
            params={"url": f"{upstream}/sha", "via": via},
            content=sampling(random_blocks(total, b"out"), peak, digest)(),
        )
    assert response.json() == {"sha256": digest.hexdigest(), "size": total, "chunked": True}
    peak.check(total)


@pytest.mark.parametrize("declared", [True, False])
def test_fetch_sends_a_body_of_known_length_with_its_length(
    server: CelldServer, upstream: str, declared: bool
) -> None:
    """Bytes made in JS, or a request body with a Content-Length handed on untouched, go
    out with their Content-Length (not chunked), as workerd sends them."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        if declared:
            body = bytes(300_000)
            response = client.post("/forward", params={"url": f"{upstream}/sha"}, content=body)
        else:
            params = {"url": f"{upstream}/sha", "bytes": 300_000}
            response = client.post("/forward", params=params, content=b"ignored")
    assert response.json() == {
        "sha256": hashlib.sha256(bytes(300_000)).hexdigest(),
        "size": 300_000,
        "chunked": False,
    }


# -- back-pressure -----------------------------------------------------------------------------


def test_a_slow_client_slows_the_stream_down(server: CelldServer) -> None:
    """A client reading 64 KiB every 20 ms from a 1 GiB stream: the Worker produces only a
    little ahead of what the client took (socket buffers, the pipe), the server's memory
    stays flat, and when the client leaves the stream is cancelled."""
    peak = Peak(server)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(b"GET /generate?mb=1024&id=slow HTTP/1.1\r\nHost: x\r\n\r\n")
    received = 0
    try:
        while received < 16 * MB:
            data = sock.recv(64 * 1024)
            assert data, "the server closed the stream early"
            received += len(data)
            time.sleep(0.02)
            if received % (2 * MB) < 64 * 1024:
                peak.sample()
        produced = state(server, "slow")["produced"]
        assert received - MB <= produced <= received + 12 * MB
    finally:
        sock.close()
    server.wait_for(lambda: state(server, "slow")["cancelled"])
    peak.check(16 * MB)


# -- failures ----------------------------------------------------------------------------------


def test_a_stream_that_fails_cuts_the_response_short(server: CelldServer) -> None:
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("GET", "/broken") as response,
    ):
        assert response.status_code == 200  # sent before the body failed, as in workerd
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()
    server.wait_for(lambda: "TypeError: the stream broke" in server.log())
    assert "src/index.js" in server.log()  # the stack names the Worker's own file
    ping(server)


def test_a_stream_that_will_never_end_is_cut_off(server: CelldServer) -> None:
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("GET", "/hang") as response,
    ):
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()
    server.wait_for(lambda: "had hung and would never generate a response" in server.log())
    ping(server)
