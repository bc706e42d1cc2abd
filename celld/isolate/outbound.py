"""Fetch's network layer: bytes a fence forbids never reach the socket.

An isolate's host asks its fence (a workflow run's: the node's lease, celld/store/lease.py)
before it dispatches a message, but a fetch's bytes reach the socket several event-loop
passes later: httpx and httpcore await a few times on the way, and each await lets the
loop run other work first. A process paused in between (SIGSTOP, a long GC pause, a frozen
VM) would write them after its lease ended, beside the node that took its instances over.

So the fence of the isolate that asked for a fetch travels with the fetch's task (the
context variable :data:`OUTGOING_FENCE`, set by the host while it dispatches), and the
connections of fetch's client are opened through :class:`FencedBackend`, whose streams ask
the fence once more right before each write, in the same step as the write itself: once
it says no, nothing more of the request is written (the fetch fails, as one the network
refused). Its streams are plain asyncio streams, with nothing between the check and the
transport's write (anyio's send yields to the loop first, which would reopen the gap).
Bytes the kernel already took go out whatever happens next; that is the only gap left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import ssl
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

if TYPE_CHECKING:
    from celld.store.lease import EffectFence

log = logging.getLogger("celld.isolate")

#: The fence of the isolate whose message is being dispatched (and of the tasks the
#: dispatch starts: they copy the context).
OUTGOING_FENCE: ContextVar[EffectFence | None] = ContextVar("celld_outgoing_fence", default=None)

#: What a TLS close may take before the connection is simply dropped.
CLOSE_TIMEOUT_S = 5.0


class NotSent(httpcore.NetworkError):
    """The fence said no: nothing more of the request was written. (Not a WriteError:
    httpcore goes on to read a response after one of those, and none would come.)"""


class FencedStream(httpcore.AsyncNetworkStream):
    """One connection: asyncio's reader and writer, each write asked of the fence."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as error:
            raise httpcore.ReadTimeout(str(error) or "read timed out") from error
        except OSError as error:
            raise httpcore.ReadError(str(error) or type(error).__name__) from error

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        fence = OUTGOING_FENCE.get()
        if fence is not None and not fence.allows_effects():
            peer = self._writer.get_extra_info("peername")
            log.warning("a fetch to %s was not sent: this node's lease lapsed", peer)
            raise NotSent(
                "not sent: this node's lease lapsed (it may no longer act for this instance)"
            )
        try:
            self._writer.write(buffer)  # to the socket now, or to the transport's buffer
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError as error:
            raise httpcore.WriteTimeout(str(error) or "write timed out") from error
        except OSError as error:
            raise httpcore.WriteError(str(error) or type(error).__name__) from error

    async def aclose(self) -> None:
        self._writer.close()
        # Closing is all that matters; how the peer takes it (a reset, a slow TLS goodbye)
        # changes nothing for the fetch.
        with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self._writer.wait_closed()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as error:
            raise httpcore.ConnectTimeout(str(error) or "TLS handshake timed out") from error
        except (OSError, ssl.SSLError) as error:
            raise httpcore.ConnectError(str(error) or type(error).__name__) from error
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # An idle connection the server closed (or broke) cannot take a request. The
            # socket is asked too: a close that arrived since the loop last polled counts.
            return (
                self._reader.at_eof()
                or self._reader.exception() is not None
                or _readable(self._writer.get_extra_info("socket"))
            )
        names = {
            "ssl_object": "ssl_object",
            "client_addr": "sockname",
            "server_addr": "peername",
            "socket": "socket",
        }
        return self._writer.get_extra_info(names[info]) if info in names else None


class FencedBackend(httpcore.AsyncNetworkBackend):
    """Opens fetch's connections as :class:`FencedStream`."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, local_addr=local)
        except TimeoutError as error:
            raise httpcore.ConnectTimeout(str(error) or "connect timed out") from error
        except OSError as error:
            raise httpcore.ConnectError(str(error) or type(error).__name__) from error
        return _with_options(FencedStream(reader, writer), writer, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path)
        except TimeoutError as error:
            raise httpcore.ConnectTimeout(str(error) or "connect timed out") from error
        except OSError as error:
            raise httpcore.ConnectError(str(error) or type(error).__name__) from error
        return _with_options(FencedStream(reader, writer), writer, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _readable(sock: Any) -> bool:
    if sock is None or sock.fileno() < 0:
        return True  # closed
    if not hasattr(select, "poll"):  # (select() is limited to low descriptors)
        return bool(select.select([sock.fileno()], [], [], 0)[0])
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def _with_options(
    stream: FencedStream, writer: asyncio.StreamWriter, options: Iterable[Any] | None
) -> FencedStream:
    sock = writer.get_extra_info("socket")
    for option in options or ():
        sock.setsockopt(*option)
    return stream


def fence_writes(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """Open every connection of `client` (its own pool and its proxies') through
    :class:`FencedBackend`. httpx does not take a network backend, so each pool's is set
    here; a version of httpx or httpcore without one is refused, naming what is missing."""
    transports = [client._transport, *client._mounts.values()]  # noqa: SLF001
    for transport in transports:
        if transport is None:  # a pattern mounted to go without a proxy
            continue
        pool = getattr(transport, "_pool", None)
        if pool is None or not hasattr(pool, "_network_backend"):
            raise RuntimeError(
                f"fetch cannot fence its writes: {type(transport).__name__} has no connection "
                "pool with a network backend (httpx/httpcore changed; celld needs httpx 0.27 "
                "or 0.28 with httpcore 1.0)"
            )
        pool._network_backend = FencedBackend()  # noqa: SLF001
    return client
