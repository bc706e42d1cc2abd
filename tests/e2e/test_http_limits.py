"""HTTP limits of a real `celld run`: body size and streaming, slow clients, the
connection cap, response shapes a Worker may return, and the SIGTERM drain."""

from __future__ import annotations

import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
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


def test_slow_header_clients_take_no_request_slot_and_are_cut_off(server: CelldServer) -> None:
    slow = []
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")  # never finished
        slow.append(sock)
    try:
        # More unfinished requests than the cap of 30 requests at once: none of them holds
        # a slot, so a complete request is served.
        answer = raw_request(server, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ")
        # The header deadline (1 s here) closes every slow connection.
        for sock in slow:
            assert sock.recv(100) == b""
    finally:
        for sock in slow:
            sock.close()
    ping(server)


def test_the_header_deadline_counts_all_headers_not_each_byte(server: CelldServer) -> None:
    """A client that sends a header byte every 0.1 s is still cut off at the deadline
    (1 s here): bytes arriving do not extend it."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    closed = threading.Event()
    sent = [0]

    def trickle() -> None:
        try:
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            while True:
                sock.sendall(b"a")
                sent[0] += 1
                if closed.wait(0.1):
                    break
        except OSError:
            pass  # the server closed the connection

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        assert sock.recv(100) == b""  # closed by the server, while bytes kept coming
    finally:
        closed.set()
        sender.join(10)
        sock.close()
    assert sent[0] >= 1


def test_requests_in_flight_past_the_cap_get_503(server: CelldServer) -> None:
    """The cap (30 here) counts requests whose headers were read: 30 uploads that are
    still sending their bodies hold every slot, and the next request gets a 503."""
    uploads = []
    stop = threading.Event()
    for _ in range(30):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        sock.sendall(
            b"POST /drain HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n"
        )
        uploads.append(sock)

    def keep_sending() -> None:
        # a byte a second: well inside the 30 s a body may pause
        while not stop.wait(1.0):
            for sock in uploads:
                with suppress(OSError):  # a connection the server closed (the test fails)
                    sock.sendall(b"x")

    sender = threading.Thread(target=keep_sending, daemon=True)
    sender.start()
    try:
        status = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = raw_request(server, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")[:12]
            if status == b"HTTP/1.1 503":
                break
            time.sleep(0.05)
        assert status == b"HTTP/1.1 503"
    finally:
        stop.set()
        sender.join(10)
        for sock in uploads:
            sock.close()
    # The slots come back as the server sees the uploads' connections close.
    status = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = raw_request(server, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")[:12]
        if status == b"HTTP/1.1 200":
            break
        time.sleep(0.05)
    assert status == b"HTTP/1.1 200"


def ensure_open_files(needed: int) -> None:
    """Raise this process's soft limit on open files to `needed` if it is lower (the
    celld subprocesses started after inherit it); skip the test if the hard limit is
    lower still."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"the hard limit on open files is {hard}; this test needs {needed}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def open_idle(port: int, count: int) -> list[socket.socket]:
    """`count` connections that send nothing."""
    return [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(count)]


def still_open(sock: socket.socket) -> bool:
    """True if the server has not closed `sock` (nothing to read, no end of stream)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(timeout)


@contextmanager
def slowloris(port: int, count: int) -> Iterator[None]:
    """`count` connections sending request headers a byte every 0.2 s, never finishing."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(count)]
    stop = threading.Event()

    def trickle() -> None:
        for sock in socks:
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        while not stop.wait(0.2):
            for sock in socks:
                with suppress(OSError):  # closed by the server at the header deadline
                    sock.sendall(b"a")

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        yield
    finally:
        stop.set()
        sender.join(10)
        for sock in socks:
            sock.close()


def test_thousands_of_idle_and_slow_connections_do_not_keep_new_clients_out(
    tmp_path: Path,
) -> None:
    """The issue's attack: 2,000 connections that send nothing and 50 that send headers a
    byte at a time, against the default limits (a header deadline long enough to outlast
    the test): a new client's request and the operator API are still answered, and the
    idle connections are still open beside them (memory, not service)."""
    ensure_open_files(4096)
    celld = CelldServer(PROJECTS / "hostile", tmp_path / "s", args=("--header-timeout", "120"))
    celld.start()
    idle: list[socket.socket] = []
    try:
        idle = open_idle(celld.port, 2000)
        with slowloris(celld.port, 50), httpx.Client(base_url=celld.url, timeout=60) as client:
            response = client.get("/ping")
            assert (response.status_code, response.text) == (200, "pong")
            operator = client.get("/cdn-cgi/local/explorer/api/workflows")
            assert operator.status_code == 200, operator.text
        assert sum(still_open(sock) for sock in idle) == len(idle)
    finally:
        for sock in idle:
            sock.close()
        celld.stop()


def test_idle_connections_are_shed_before_the_open_files_limit_is_reached(
    tmp_path: Path,
) -> None:
    """celld under a hard limit of 1,024 open files and 2,000 silent connections: the
    oldest idle connections are closed before accepting runs out of descriptors, so a new
    client and the operator API are answered and the server never hits EMFILE."""
    ensure_open_files(4096)
    celld = CelldServer(
        PROJECTS / "hostile", tmp_path / "s", args=("--header-timeout", "120"), open_files=1024
    )
    celld.start()
    idle: list[socket.socket] = []
    try:
        idle = open_idle(celld.port, 2000)
        with httpx.Client(base_url=celld.url, timeout=60) as client:
            response = client.get("/ping")
            assert (response.status_code, response.text) == (200, "pong")
            operator = client.get("/cdn-cgi/local/explorer/api/workflows")
            assert operator.status_code == 200, operator.text
    finally:
        for sock in idle:
            sock.close()
        celld.stop()
    log = celld.log()
    assert "to make room for new ones" in log
    assert "Too many open files" not in log


def test_past_the_idle_limit_the_oldest_idle_connections_are_shed(tmp_path: Path) -> None:
    ensure_open_files(1024)
    celld = CelldServer(
        PROJECTS / "hostile",
        tmp_path / "s",
        args=("--header-timeout", "120", "--max-idle-connections", "50"),
    )
    celld.start()
    idle: list[socket.socket] = []
    kept_alive = socket.create_connection(("127.0.0.1", celld.port), timeout=60)
    try:
        # A kept-alive connection is idle again once its response is sent...
        kept_alive.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"pong"):
            answer += kept_alive.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 ")
        # ...and stays idle while it starts its next request (a byte is sent, so only
        # the header deadline, 120 s here, would close it): it is the oldest idle
        # connection when the 50th idle one arrives, and is closed for it.
        kept_alive.sendall(b"G")
        idle = open_idle(celld.port, 50)
        assert kept_alive.recv(1) == b""
        assert still_open(idle[0])
        idle += open_idle(celld.port, 150)
        # Each connection past the limit made the server close the oldest idle one.
        for sock in idle[:150]:
            assert sock.recv(1) == b""
        ping(celld, timeout=60)
        # The newest are still open (the ping's connection shed one more of them).
        assert sum(still_open(sock) for sock in idle[150:]) >= 48
    finally:
        kept_alive.close()
        for sock in idle:
            sock.close()
        celld.stop()


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
