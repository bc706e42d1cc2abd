"""WebSockets to a Durable Object with `celld run --workers 2`: real processes, Python's
`websockets` client. A client's connection lands in either process; the object runs in
its owner, and a client connected to the other process has its frames relayed over the
cluster channel (celld.cluster.relay). Hibernation behaves as on one process (the owner
evicts the idle object and keeps its sockets; a message wakes it with its attachments),
and a killed process ends the sockets that depended on it: the client of an object whose
process was killed is closed with 1011, and an object whose client's process was killed
sees that client go away (1006, not clean).

Each process labels its own /metrics (`celld_cluster_process`), so the test finds which
process holds what by asking on fresh connections until both have answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from celld.cluster.relay import OWNER_GONE
from tests.celld_run import CelldRun
from tests.cluster.test_workers import pids
from tests.e2e.test_websockets import exchange, steps_then_closes

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "projects" / "websockets"
WAIT_S = 60


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[CelldRun]:
    run = CelldRun(
        PROJECT,
        tmp_path / "state",
        "--port", "0", "--workers", "2",
        env={"CELLD_TEST_CLOCK": "manual"},
    )  # fmt: skip
    try:
        run.ready(timeout=120)
        yield run
    finally:
        run.stop()


def fresh(url: str, method: str, path: str, **kwargs) -> httpx.Response:  # type: ignore[no-untyped-def]
    """One request on its own connection: either process may accept it."""
    with httpx.Client(base_url=url, timeout=60) as client:
        return client.request(method, path, **kwargs)


def sample(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def per_process(url: str) -> dict[int, str]:
    """Each process's own /metrics, asked on fresh connections until both answered."""
    seen: dict[int, str] = {}
    deadline = time.monotonic() + WAIT_S
    while len(seen) < 2:
        assert time.monotonic() < deadline, f"only processes {sorted(seen)} answered"
        try:
            text = fresh(url, "GET", "/cdn-cgi/celld/metrics").text
        except httpx.TransportError:
            continue  # a process being restarted
        index = re.search(r'^celld_cluster_process\{index="(\d+)"\} 1$', text, re.MULTILINE)
        assert index is not None, text
        seen[int(index.group(1))] = text
    return seen


def relayed(url: str) -> dict[int, dict[str, float]]:
    return {
        index: {
            side: sample(text, "celld_cluster_relayed_websockets", f'{{side="{side}"}}')
            for side in ("client", "object")
        }
        for index, text in per_process(url).items()
    }


async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_S
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def ws_url(run: CelldRun, path: str) -> str:
    return run.url.replace("http://", "ws://") + path


async def relayed_client(run: CelldRun, room: str, name: str) -> AsyncIterator[ClientConnection]:
    """A client of `room` whose connection landed in the process that does not run the
    object (connections landing in the owner are closed and made again)."""
    for _ in range(40):
        before = sum(p["client"] for p in (await asyncio.to_thread(relayed, run.url)).values())
        ws = await connect(ws_url(run, f"/ws?instanceId={room}&name={name}"))
        assert json.loads(await ws.recv())["type"] == "hello"
        now = await asyncio.to_thread(relayed, run.url)
        if sum(p["client"] for p in now.values()) > before:
            yield ws
            return
        await ws.close()
    raise AssertionError("40 connections in a row landed in the object's own process")


async def one_relayed(run: CelldRun, room: str, name: str) -> ClientConnection:
    return await anext(relayed_client(run, room, name))


def owner_of_relayed(run: CelldRun) -> tuple[int, int]:
    """(the process holding objects with relayed clients, the one holding the clients)."""
    counts = relayed(run.url)
    owner = next(i for i, sides in counts.items() if sides["object"] > 0)
    client = next(i for i, sides in counts.items() if sides["client"] > 0)
    return owner, client


async def test_a_relayed_socket_hibernates_and_wakes_as_on_one_process(cluster: CelldRun) -> None:
    ada = await one_relayed(cluster, "room1", "ada")
    async with ada, connect(ws_url(cluster, "/ws?instanceId=room1&name=bob")) as bob:
        assert json.loads(await bob.recv())["type"] == "hello"
        await exchange(
            ada,
            ("who", '{"name":"ada","joined":1}'),
            ("count all", "2"),
            ("rename ada2", "renamed"),
            (bytes([1, 2, 3]), bytes([3, 2, 1])),
            ("hello everyone", "ada2: hello everyone"),
        )
        assert await bob.recv() == "ada2: hello everyone"
        await ada.send("constructed")
        first = await ada.recv()

        # Idle: the owner evicts the object and keeps both sockets. The clock moves in
        # every process; until the eviction lands, a message finds the same object.
        woken = first
        deadline = time.monotonic() + WAIT_S
        while woken == first:
            assert time.monotonic() < deadline, "the object was never evicted"
            moved = await asyncio.to_thread(
                fresh, cluster.url, "POST", "/cdn-cgi/celld/clock", params={"advance": 61_000}
            )
            assert moved.status_code == 200, moved.text
            await asyncio.sleep(0.2)
            await ada.send("ping")  # the host's auto-response: never wakes the object
            assert await ada.recv() == "pong"
            await ada.send("constructed")  # wakes it if it was evicted
            woken = await ada.recv()
        await ada.send("who")  # attachments and tags came back with it
        assert json.loads(await ada.recv()) == {"name": "ada2", "joined": 1}
        await ada.send("count all")
        assert await ada.recv() == "2"

        # A workflow's steps (instances sharded too) reach both clients through the object.
        await steps_then_closes(ada, bob, lambda path: fresh(cluster.url, "GET", path))
    # both ends of every relay are gone once the sockets closed
    await until(
        lambda: all(sum(p.values()) == 0 for p in relayed(cluster.url).values()), "no relays"
    )


async def test_a_killed_owner_closes_its_relayed_clients_with_1011(cluster: CelldRun) -> None:
    ada = await one_relayed(cluster, "room2", "ada")
    owner, _ = owner_of_relayed(cluster)
    victim = pids(cluster)[owner][-1]
    os.kill(victim, signal.SIGKILL)
    with pytest.raises(ConnectionClosed):
        await ada.recv()
    assert (ada.close_code, ada.close_reason) == OWNER_GONE
    # the owner is started again: the object answers, without the old socket
    await until(lambda: len(pids(cluster).get(owner, [])) == 2, "the restart")
    async with connect(ws_url(cluster, "/ws?instanceId=room2&name=bob")) as bob:
        assert json.loads(await bob.recv())["type"] == "hello"
        await bob.send("count all")
        assert await bob.recv() == "1"


async def test_a_killed_client_process_closes_the_objects_socket_1006(cluster: CelldRun) -> None:
    ada = await one_relayed(cluster, "room3", "ada")
    _, client = owner_of_relayed(cluster)
    os.kill(pids(cluster)[client][-1], signal.SIGKILL)
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(WAIT_S):
            while True:  # what the room said before the kill (a closed attempt's leave) first
                await ada.recv()
    assert ada.close_code == 1006  # the connection dropped: no close frame

    def closed() -> bool:
        try:
            lines = fresh(cluster.url, "GET", "/log").json()
        except (httpx.TransportError, ValueError):
            return False
        return any(line.startswith("close ada 1006 ") and line.endswith(" false")
                   for line in lines)  # fmt: skip

    await until(closed, "the object to see its client go away")
