"""`celld run` serving ordinary Worker projects over HTTP."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.celld_server import CelldServer
from tests.e2e.conftest import PROJECTS, REPO


def test_hello_example_answers_like_wrangler_dev(tmp_path: Path) -> None:
    # The same JSON `wrangler dev` gives for this project (checked side by side).
    server = CelldServer(REPO / "examples" / "hello", tmp_path / "state").start()
    try:
        response = server.get("/some/path", headers={"user-agent": "demo"})
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {"hello": "celld", "path": "/some/path", "ua": "demo"}
    finally:
        server.stop()


def test_vars_and_var_override(tmp_path: Path) -> None:
    server = CelldServer(
        PROJECTS / "worker", tmp_path / "state", args=("--var", "NAME:override")
    ).start()
    try:
        assert server.get("/vars").json() == {"name": "override", "count": 3}
    finally:
        server.stop()


def test_multi_file_modules_and_live_bindings(worker_server: CelldServer) -> None:
    assert worker_server.get("/hello").text == "hello, celld"
    first = worker_server.get("/count").json()["requests"]
    second = worker_server.get("/count").json()["requests"]
    assert second >= first >= 1


def test_request_and_response_round_trip(worker_server: CelldServer) -> None:
    body = bytes(range(256)) * 10
    response = worker_server.post(
        "/echo", content=body, headers={"content-type": "application/x-test"}
    )
    assert response.status_code == 201
    assert response.content == body
    assert response.headers["x-method"] == "POST"
    assert response.headers["x-length"] == str(len(body))
    assert response.headers["content-type"] == "application/x-test"


def test_repeated_set_cookie_headers_survive(worker_server: CelldServer) -> None:
    response = worker_server.get("/cookies")
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]


def test_redirect_and_not_found(worker_server: CelldServer) -> None:
    response = worker_server.get("/redirect")
    assert response.status_code == 302
    assert response.headers["location"] == "https://example.com/next"
    assert worker_server.get("/nope").status_code == 404


def test_digest(worker_server: CelldServer) -> None:
    assert (
        worker_server.get("/digest").text
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/throw", "RangeError: deliberate failure"),
        ("/loop", "Worker exceeded CPU time limit."),
        ("/bomb", "out of memory"),
        ("/recurse", "Maximum call stack size exceeded"),
        ("/hang", "hung"),
        ("/hang-after-cleared-timer", "hung"),
        ("/not-a-response", "not a Response"),
    ],
)
def test_faults_give_500_and_server_keeps_serving(
    worker_server: CelldServer, path: str, expected: str
) -> None:
    response = worker_server.get(path)
    assert response.status_code == 500
    assert expected in response.text
    assert worker_server.get("/hello").text == "hello, celld"


def test_uncaught_exception_logs_stack_with_real_file(worker_server: CelldServer) -> None:
    worker_server.get("/throw")
    log = worker_server.wait_for(
        lambda: "deliberate failure" in worker_server.log() and worker_server.log()
    )
    assert "src/routes.js:" in log


def test_concurrent_requests_do_not_wait_for_each_other(worker_server: CelldServer) -> None:
    def slow() -> str:
        return httpx.get(f"{worker_server.url}/slow?ms=1500", timeout=30).text

    with ThreadPoolExecutor(4) as pool:
        slow_ones = [pool.submit(slow) for _ in range(3)]
        # While three requests sleep, quick ones are answered.
        quick = [worker_server.get("/hello").text for _ in range(5)]
        assert quick == ["hello, celld"] * 5
        assert [f.result() for f in slow_ones] == ["slept 1500"] * 3


def test_wait_until_keeps_working_after_the_response(worker_server: CelldServer) -> None:
    assert worker_server.get("/wait-until").text == "accepted"
    worker_server.wait_for(lambda: "done" in worker_server.get("/wait-until-result").json())


@pytest.fixture
def upstream() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            body = f"upstream saw x-from={self.headers.get('x-from')}".encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/path"
    httpd.shutdown()


def test_outbound_fetch(worker_server: CelldServer, upstream: str) -> None:
    answer = worker_server.get("/fetch", params={"url": upstream}).json()
    assert answer == {"status": 200, "body": "upstream saw x-from=celld"}


def test_typescript_entry_point(tmp_path: Path) -> None:
    server = CelldServer(PROJECTS / "tsworker", tmp_path / "state").start()
    try:
        assert server.get("/").json() == {"areas": [9, 13]}
    finally:
        server.stop()


def test_syntax_error_stops_celld_run_with_position(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "celld", "run", str(PROJECTS / "broken"), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "src/index.js:3:" in result.stderr


def test_invalid_config_names_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.js").write_text(
        "export default { fetch() { return new Response('x') } }"
    )
    (tmp_path / "wrangler.toml").write_text(
        'name = "x"\nmain = "src/index.js"\ncompat_date = "2026-01-01"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "celld", "run", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "wrangler.toml" in result.stderr and "compat_date" in result.stderr


def test_isolate_memory_limit_is_configurable(tmp_path: Path, worker_server: CelldServer) -> None:
    assert worker_server.get("/alloc", params={"mb": 40}).status_code == 200  # default 128 MiB
    small = CelldServer(
        PROJECTS / "worker", tmp_path / "state", env={"CELLD_ISOLATE_MEMORY_MB": "24"}
    ).start()
    try:
        response = small.get("/alloc", params={"mb": 40})
        assert response.status_code == 500
        assert "out of memory" in response.text
        assert small.get("/alloc", params={"mb": 4}).status_code == 200
    finally:
        small.stop()
