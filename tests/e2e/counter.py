"""An outside HTTP server that counts step executions (it survives celld crashes).

`POST /hit?step=...&value=...` records a step callback's execution; with `&seen=<JSON>`
(and `POST /seen?from=...&seen=<JSON>`, from code outside steps) it also records which step
results the sender had seen when it sent it: witnesses that the crash harness compares
with the journal. Requests are recorded in the order they arrive, which is not the
order they were sent in: a request can wait in a connect retry for a second or more.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlparse


class Counter:
    def __init__(self) -> None:
        self.hits: list[tuple[str, str]] = []
        #: (sender, the step results it had seen): every effect that carried results
        self.witnesses: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self.url = ""

    def record(self, step: str, value: str) -> None:
        with self._lock:
            self.hits.append((step, value))

    def witness(self, sender: str, seen: dict[str, str]) -> None:
        with self._lock:
            self.witnesses.append((sender, seen))

    def values(self, step: str) -> list[str]:
        with self._lock:
            return [value for name, value in self.hits if name == step]


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A test server's handler: answers `ok` and logs nothing (the recorders here)."""

    def answer_ok(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def counter_server() -> Iterator[Counter]:
    counter = Counter()

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            url = urlparse(self.path)
            query = parse_qs(url.query)
            if url.path == "/seen":
                counter.witness(query["from"][0], json.loads(query["seen"][0]))
            else:
                counter.record(query["step"][0], query["value"][0])
                if "seen" in query:
                    counter.witness(query["step"][0], json.loads(query["seen"][0]))
            self.answer_ok()

    with serving(Handler) as url:
        counter.url = url
        yield counter


class _Server(http.server.ThreadingHTTPServer):
    # A backlog of 5 (socketserver's default) overflows when a loaded celld sends many
    # requests at once: the dropped connects are retried a second or more later.
    request_queue_size = 512

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            return  # the sender went away (a celld killed mid-request): nothing to answer
        super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free local port in a thread; yields the base URL."""
    httpd = _Server(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
