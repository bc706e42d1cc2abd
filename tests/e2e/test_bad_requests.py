"""Bad bytes in a URL or header, sent over a raw socket to a real `celld run`: a 400 or 404
(or the Worker's own answer, spelled as sent, where workerd passes the request on), never a
500 and never a traceback in the log. The project has assets, a Worker and the operator API.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CelldServer]:
    celld = CelldServer(PROJECTS / "storage", tmp_path_factory.mktemp("bad") / "state")
    celld.start()
    yield celld
    celld.stop()


def send(
    server: CelldServer, target: bytes, headers: bytes = b"Host: 127.0.0.1\r\n"
) -> tuple[int, bytes]:
    """One raw request; the status and the body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\n" + headers + b"Connection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def worker_saw(body: bytes) -> str:
    return str(json.loads(body)["worker"])


# Paths the assets have no file for go on to the Worker (run_worker_first covers /api/*
# only), which sees them spelled as the client sent them, as under wrangler dev.
PASSED_ON = [
    b"/style.css%00.txt",
    b"/%00",
    b"/style%ff.css",
    b"/%c0%af",
    b"/style.css%zz",
    b"/style.css%",
    b"/style.css%01",
    b"/a%0d%0ab",
    b"/docs/%00/index.html",
    b"/" + b"b" * 8000,  # longer than a file name may be
    b"/api/x%00y",
    b"/api/%ff%fe",
    # escapes Starlette re-spells in request.url (a "?", "#" or "\\" in the decoded path)
    b"/a%3Fb",
    b"/a%23b",
    b"/a%5Cb",
]


@pytest.mark.parametrize("target", PASSED_ON, ids=lambda t: t[:24].decode())
def test_bad_paths_reach_the_worker_as_sent(server: CelldServer, target: bytes) -> None:
    status, body = send(server, target)
    assert status == 200, body
    assert worker_saw(body) == target.decode()


def test_the_assets_binding_answers_404_for_a_name_no_file_can_have(server: CelldServer) -> None:
    for name in (b"/style.css%2500.txt", b"/" + b"c" * 8000, b"/%2500"):
        status, body = send(server, b"/api/assets?path=" + name)
        assert status == 404, (name, body)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (b"/cdn-cgi/celld/x%00", 404),
        (b"/cdn-cgi/celld/workflows/%ff/instances/%00", 404),
        (b"/cdn-cgi/celld/workflows/writer/instances/%zz%4", 404),
        (b"/cdn-cgi/celld/workflows/writer/instances/" + b"i" * 8000, 404),
        (b"/cdn-cgi/local/explorer/api/workflows/wr%00iter", 404),
        (b"/cdn-cgi/local/explorer/api/workflows/writer/instances/a%00", 404),
        (b"/cdn-cgi/local/explorer/api/workflows/writer/instances/%ff", 404),
        (b"/cdn-cgi/local/explorer/api/workflows/writer/instances?per_page=%00", 400),
        (b"/cdn-cgi/local/explorer/api/%ff%00", 404),
    ],
    ids=lambda t: t[-24:].decode() if isinstance(t, bytes) else str(t),
)
def test_bad_paths_to_the_operator_api(server: CelldServer, target: bytes, expected: int) -> None:
    assert send(server, target)[0] == expected


@pytest.mark.parametrize(
    "host", [b"[", b"[::1", b"x:99999999", b"x:abc", b"a b", b"127.0.0.1:8787/x"]
)
@pytest.mark.parametrize("target", [b"/style.css", b"/api/x", b"/cdn-cgi/celld/clock"])
def test_a_host_no_url_can_hold_gets_400(server: CelldServer, host: bytes, target: bytes) -> None:
    status, body = send(server, target, b"Host: " + host + b"\r\n")
    assert (status, body) == (400, b"Bad Request: invalid Host header\n")


@pytest.mark.parametrize(
    "header",
    [
        b"X-A: a\x01b",  # a control character
        b"X-A: a\x00b",
        b"X A: b",  # a space in the name
        b"Host: x\xff\x00y",
    ],
)
def test_control_characters_in_headers_get_400(server: CelldServer, header: bytes) -> None:
    assert send(server, b"/api/x", b"Host: x\r\n" + header + b"\r\n")[0] == 400


@pytest.mark.parametrize(
    "header",
    [b"X-A: a\xffb", b"Cookie: a=\xff", b"Origin: http://[", b"If-None-Match: \xff"],
)
def test_odd_but_legal_header_bytes_are_served(server: CelldServer, header: bytes) -> None:
    for target in (b"/api/x", b"/style.css"):
        status, _ = send(server, target, b"Host: 127.0.0.1\r\n" + header + b"\r\n")
        assert status == 200, (target, header)


def test_an_origin_no_url_can_hold_is_cross_origin(server: CelldServer) -> None:
    """A state-changing operator request whose Origin cannot be parsed is refused (403),
    not a 500."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /cdn-cgi/local/explorer/api/workflows/writer/instances HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\nOrigin: http://[\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\n{}"
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 403 ")


def test_bytes_the_parser_refuses_get_400(server: CelldServer) -> None:
    assert send(server, b"/style\xff.css")[0] == 400  # a raw byte over 0x7f in the target
    assert send(server, b"/" + b"a" * 70_000)[0] == 400  # over the parser's line limit


def test_no_traceback_was_logged(server: CelldServer) -> None:
    """Runs last in this module: every request above was answered without an exception."""
    log = server.log()
    assert "Traceback" not in log and "Exception in ASGI application" not in log
