"""Helpers for the hostile-code tests: a /ping probe, and the server's RSS and CPU."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.celld_server import CelldServer

#: How long /ping may take while another request misbehaves (the issue's bound).
PING_DEADLINE_S = 1.0


def ping(server: CelldServer, timeout: float = PING_DEADLINE_S) -> None:
    """/ping answers "pong" within `timeout` (by default PING_DEADLINE_S)."""
    with httpx.Client(base_url=server.url, timeout=timeout) as client:
        response = client.get("/ping")
    assert (response.status_code, response.text) == (200, "pong"), (
        response.status_code,
        response.text[:500],
    )


@contextmanager
def answering(
    server: CelldServer, timeout: float = 60, every: float = 0.1
) -> Iterator[list[float]]:
    """Ping all along the block, each ping on a new connection with a generous `timeout`
    (no latency is judged); fails the test if one was not answered "pong". Yields the
    `time.monotonic()` of each answer, to check some came while something else ran."""
    stop = threading.Event()
    answered: list[float] = []
    errors: list[BaseException] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                ping(server, timeout)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)
                return
            answered.append(time.monotonic())
            stop.wait(every)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield answered
    finally:
        stop.set()
        thread.join(timeout + 10)
    if errors:
        raise AssertionError(f"/ping was not answered: {errors[0]!r}")


@contextmanager
def pinging(server: CelldServer, every: float = 0.1) -> Iterator[list[float]]:
    """Ping all along the block; fails the test if one ping failed or was late.
    Yields the list of ping durations (seconds)."""
    stop = threading.Event()
    durations: list[float] = []
    errors: list[BaseException] = []

    def loop() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                ping(server)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)
                return
            durations.append(time.monotonic() - started)
            stop.wait(every)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield durations
    finally:
        stop.set()
        thread.join(10)
    if errors:
        raise AssertionError(f"/ping failed while another request misbehaved: {errors[0]!r}")
    assert durations, "no ping completed"


def in_background(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run `fn` on a thread; the returned function waits for and returns its result."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as error:  # noqa: BLE001 - re-raised by the waiter
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def wait(timeout: float = 60) -> Any:
        thread.join(timeout)
        if errors:
            raise errors[0]
        assert result, "the background call did not finish"
        return result[0]

    return wait


def rss_bytes(server: CelldServer) -> int:
    assert server.process is not None
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def cpu_seconds(server: CelldServer) -> float:
    """User + system CPU time the server process has used."""
    assert server.process is not None
    with open(f"/proc/{server.process.pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def cpu_share_over(server: CelldServer, seconds: float) -> float:
    """Fraction of one core the server used over the next `seconds`."""
    before = cpu_seconds(server)
    time.sleep(seconds)
    return (cpu_seconds(server) - before) / seconds
