"""An outside HTTP server that counts step executions (it survives celld crashes)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlparse


class Counter:
    def __init__(self) -> None:
        self.hits: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.url = ""

    def record(self, step: str, value: str) -> None:
        with self._lock:
            self.hits.append((step, value))

    def values(self, step: str) -> list[str]:
        with self._lock:
            return [value for name, value in self.hits if name == step]


@contextmanager
def counter_server() -> Iterator[Counter]:
    counter = Counter()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            query = parse_qs(urlparse(self.path).query)
            counter.record(query["step"][0], query["value"][0])
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        counter.url = url
        yield counter


@contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free local port in a thread; yields the base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
