#!/usr/bin/env python3
"""Sends one plain HTTP request every few milliseconds until stdin closes, then prints one
JSON list of [sent_ms, latency_ms, status] triples.

    python bench/pinger.py http://127.0.0.1:8787/ping --every-ms 5

bench/run.py's `http_under_load` runs it as its own process while workflows run: in the
driver's process the pings would share the GIL with the threads creating and polling
workflows, and a thread waiting for the GIL (up to the 5 ms switch interval) would show up
as server latency. The standard library's keep-alive connection keeps the client's own
cost per request small.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import threading
import time
import urllib.parse


def ping_until(url: str, every_ms: float, stop: threading.Event) -> list[list[float]]:
    """GET `url` on one keep-alive connection, one request every `every_ms` (measured from
    the start of the previous one), until `stop` is set; reconnects if the server closes."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path or "/"
    connection: http.client.HTTPConnection | None = None
    samples: list[list[float]] = []
    while not stop.is_set():
        began = time.perf_counter()
        sent_ms = time.time() * 1000
        try:
            if connection is None:
                connection = http.client.HTTPConnection(
                    parts.hostname, parts.port or 80, timeout=60
                )
                connection.connect()
                connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            if connection is not None:
                connection.close()
            connection = None
            status = 0
        samples.append([sent_ms, (time.perf_counter() - began) * 1000, status])
        stop.wait(max(0.0, every_ms / 1000 - (time.perf_counter() - began)))
    if connection is not None:
        connection.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--every-ms", type=float, default=5.0)
    args = parser.parse_args()
    stop = threading.Event()
    result: list[list[list[float]]] = []
    worker = threading.Thread(
        target=lambda: result.append(ping_until(args.url, args.every_ms, stop))
    )
    worker.start()
    sys.stdin.read()  # the driver closes stdin when the load is over
    stop.set()
    worker.join()
    json.dump(result[0], sys.stdout)


if __name__ == "__main__":
    main()
