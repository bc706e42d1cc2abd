"""Fetch's network layer (celld/isolate/outbound.py): a fetch whose isolate's fence says no
writes nothing; everything else is plain HTTP(S) as before: keep-alive, a connection the
server closed while idle, TLS. A real server on 127.0.0.1, real sockets, a real Lease."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from celld.isolate.host import HostError
from celld.isolate.outbound import OUTGOING_FENCE, fence_writes
from celld.isolate.webops import close_fetch_client, op_fetch
from celld.store.lease import Fence, Lease

TLS = Path(__file__).resolve().parent / "fixtures" / "tls"


@dataclass
class Server:
    """Answers every request with `ok` on a kept-alive connection (or closes it after the
    answer, for /close); records what each connection received."""

    url: str = ""
    received: list[bytearray] = field(default_factory=list)
    closed: list[asyncio.Event] = field(default_factory=list)
    requests: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = bytearray()
        self.received.append(data)
        done = asyncio.Event()
        self.closed.append(done)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError) as end:
                    if isinstance(end, asyncio.IncompleteReadError):
                        data += end.partial
                    return
                data += head
                self.requests += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
                if head.startswith(b"GET /close "):
                    return
        finally:
            writer.close()
            done.set()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()
    listening = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    state.url = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    try:
        yield state
    finally:
        listening.close()
        await close_fetch_client()


def _valid_fence() -> tuple[Lease, Fence]:
    lease = Lease(margin_s=0.0)
    lease.new_epoch(1)
    lease.renewed(time.monotonic(), 60)
    fence = lease.fence()
    assert fence is not None
    return lease, fence


async def _fetch(url: str, fence: Fence | None) -> dict[str, object]:
    token = OUTGOING_FENCE.set(fence)
    try:
        return await op_fetch({"method": "GET", "url": url})
    finally:
        OUTGOING_FENCE.reset(token)


async def test_a_fetch_under_a_lapsed_lease_writes_nothing(server: Server) -> None:
    lease, fence = _valid_fence()
    answer = await _fetch(f"{server.url}/close", fence)  # allowed: sent and answered
    assert answer["status"] == 200 and server.requests == 1
    await asyncio.wait_for(server.closed[0].wait(), 20)
    lease.lapse("a test")
    with pytest.raises(HostError, match="not sent: this node's lease lapsed"):
        await _fetch(f"{server.url}/hello", fence)
    # the refused fetch's connection closes without one byte having reached the server
    await asyncio.wait_for(server.closed[1].wait(), 20)
    assert server.received[1] == b"" and server.requests == 1
    lease.close()


async def test_connections_are_kept_alive_and_one_the_server_closed_is_replaced(
    server: Server,
) -> None:
    for _ in range(3):
        assert (await _fetch(f"{server.url}/hello", None))["status"] == 200
    assert len(server.received) == 1 and server.requests == 3  # one connection, reused
    assert (await _fetch(f"{server.url}/close", None))["status"] == 200
    await asyncio.wait_for(server.closed[0].wait(), 20)  # closed after its answer
    assert (await _fetch(f"{server.url}/hello", None))["status"] == 200  # on a new one
    assert len(server.received) == 2 and server.requests == 5


async def test_https_through_the_fenced_network_layer() -> None:
    state = Server()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "cert.pem", TLS / "key.pem")
    listening = await asyncio.start_server(state.handle, "127.0.0.1", 0, ssl=context)
    port = listening.sockets[0].getsockname()[1]
    lease, fence = _valid_fence()
    trusting = ssl.create_default_context(cafile=str(TLS / "cert.pem"))
    client = fence_writes(httpx.AsyncClient(verify=trusting))
    try:
        token = OUTGOING_FENCE.set(fence)
        try:
            response = await client.get(f"https://127.0.0.1:{port}/hello")
            assert (response.status_code, response.text) == (200, "ok")
            lease.lapse("a test")
            with pytest.raises(httpx.NetworkError, match="not sent"):
                await client.get(f"https://127.0.0.1:{port}/again")
        finally:
            OUTGOING_FENCE.reset(token)
        assert state.requests == 1
    finally:
        await client.aclose()
        listening.close()
        lease.close()
