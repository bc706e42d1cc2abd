"""HTTP limits of a real `celld run`: body size and streaming, slow clients, the
connection cap, response shapes a Worker may return, and the SIGTERM drain."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS
from tests.e2e.hostile import ping, pinging, rss_bytes

MB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(
        PROJECTS / "hostile",
        tmp_path_factory.mktemp("http") / "s",
        args=("--max-connections", "30", "--header-timeout", "1"),
    )
    celld.start()
    yield celld
    celld.stop()


def raw_request(server: CelldServer, head: bytes, timeout: float = 30) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        sock.sendall(head)
        return sock.recv(4096)


def zeros(total: int, chunk: int = MB) -> Iterator[bytes]:
    block = bytes(chunk)
    sent = 0
    while sent < total:
        size = min(chunk, total - sent)
        yield block[:size]
        sent += size


def test_a_declared_body_over_100_mb_is_refused_before_it_is_sent(server: CelldServer) -> None:
    head = (
        b"POST /drain HTTP/1.1\r\nHost: x\r\nContent-Length: 104857601\r\n"
        b"Content-Type: application/octet-stream\r\n\r\n"
    )
    answer = raw_request(server, head)
    assert answer.startswith(b"HTTP/1.1 413 ")
    ping(server)


def test_a_chunked_body_growing_past_100_mb_gets_413(server: CelldServer) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        response = client.post("/drain", content=zeros(100 * MB + 1))
    assert response.status_code == 413
    ping(server)


def test_large_bodies_are_streamed_not_buffered(server: CelldServer) -> None:
    for _ in range(3):
        ping(server)
    baseline = rss_bytes(server)
    peak = [baseline]
    size = 40 * MB

    def upload() -> httpx.Response:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            headers = {"content-length": str(size)}
            return client.post("/drain", content=zeros(size), headers=headers)

    results: list[httpx.Response] = []
    with pinging(server):
        threads = [threading.Thread(target=lambda: results.append(upload())) for _ in range(6)]
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            peak.append(rss_bytes(server))
            time.sleep(0.05)
    assert [(r.status_code, r.text) for r in results] == [(200, str(size))] * 6
    # Six 40 MB bodies at once: held whole they would need well over 240 MB.
    assert max(peak) - baseline < 120 * MB
    assert rss_bytes(server) - baseline < 64 * MB


def test_small_bodies_still_arrive_whole(server: CelldServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/body-length", content=b"hello").text == "5"
        assert client.post("/body-length", content=zeros(3 * MB)).text == str(3 * MB)


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("/response-error", 500, "Response.error()"),
        ("/stream", 200, "chunk0;chunk1;chunk2;"),
        ("/redirect", 301, ""),
    ],
)
def test_every_response_shape_is_served_or_a_clean_500(
    server: CelldServer, path: str, status: int, text: str
) -> None:
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=False) as client:
        response = client.get(path)
    assert response.status_code == status
    assert text in response.text
    ping(server)


def test_a_stream_that_fails_at_once_still_sends_its_head(server: CelldServer) -> None:
    """The head goes out when the handler returns (as wrangler dev sends it); the body's
    failure then cuts the response short instead of turning it into a 500."""
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("GET", "/broken-stream") as response,
    ):
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()
    server.wait_for(lambda: "TypeError: the stream broke" in server.log())
    ping(server)


def test_slow_header_clients_are_cut_off_and_the_cap_gives_503(server: CelldServer) -> None:
    slow = []
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")  # never finished
        slow.append(sock)
    try:
        # Over the cap of 30 connections: a clear 503, not a hang.
        answer = raw_request(server, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503 ")
        # The header deadline (1 s here) closes every slow connection...
        for sock in slow:
            assert sock.recv(100) == b""
    finally:
        for sock in slow:
            sock.close()
    # ...and normal service is back.
    ping(server)


def test_sigterm_drains_for_the_grace_period_then_exits(tmp_path: Path) -> None:
    celld = CelldServer(PROJECTS / "hostile", tmp_path / "s", args=("--grace", "1")).start()
    assert celld.process is not None
    results: list[httpx.Response] = []

    def wait_long() -> None:
        with httpx.Client(base_url=celld.url, timeout=60) as client:
            results.append(client.get("/long-timer"))

    waiter = threading.Thread(target=wait_long)
    waiter.start()
    time.sleep(0.5)
    celld.process.terminate()
    celld.process.wait(30)
    waiter.join(30)
    # uvicorn re-raises the signal once it has shut down cleanly.
    assert celld.process.returncode in (0, -15)
    assert results and results[0].status_code == 503
    assert "shutting down" in results[0].text
    assert "Traceback" not in celld.log()
