"""uvicorn's HTTP/1.1 protocol (httptools) with celld's rules for idle connections.

uvicorn counts every open connection against its concurrency limit and times out idle
keep-alive connections with a timer any byte cancels: 2,000 sockets that connect and send
nothing, or send their headers a byte at a time, take every slot and keep every client
out. Here a connection tells celld/server/connections.py what it is doing:

* from its start, and from the first byte of each later request, it is waiting for
  request headers, with a deadline for all of them (`--header-timeout`);
* once a request's headers are read it is busy: only then does it count against
  `--max-connections` (celld/server/admission.py counts requests in flight);
* once its response is sent and it is kept alive, it is idle again; the oldest idle
  connections are closed when too many are idle (`--max-idle-connections`).

Everything but the last hook is the parser's callback interface (httptools calls
`on_message_begin` and `on_headers_complete`) or asyncio's (`connection_made`,
`connection_lost`). The last, `on_response_complete`, is uvicorn's own: `uvicorn_hooks()`
checks that it is there and is called with the response cycle's `on_response`; where it
is not, kept-alive connections are simply never counted idle again (uvicorn's keep-alive
timeout still closes them) and everything else holds.

The parser is httptools (llhttp, in C) rather than h11: h11 parses in Python on the event
loop's thread, about 150 us of its CPU per request here (bench/PROFILE.md).
"""

from __future__ import annotations

import asyncio
import inspect
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from celld.isolate.inline import inline_turns
from celld.server.connections import MAX_IDLE_CONNECTIONS, IdleConnections

log = logging.getLogger("celld.server")

#: Seconds a client has to send a request's headers.
HEADER_TIMEOUT_S = 10.0


def uvicorn_hooks(
    protocol: type = HttpToolsProtocol, cycle: type = RequestResponseCycle
) -> str | None:
    """Why uvicorn's private hook for a finished response cannot be used (None: it can):
    `HttpToolsProtocol.on_response_complete`, passed to each `RequestResponseCycle` as
    its `on_response` callback."""
    hook = getattr(protocol, "on_response_complete", None)
    if not callable(hook):
        return "uvicorn's HttpToolsProtocol has no on_response_complete method"
    try:
        cycle_parameters = inspect.signature(cycle.__init__).parameters
        hook_parameters = inspect.signature(hook).parameters
    except (TypeError, ValueError) as error:
        return f"uvicorn's response cycle cannot be inspected ({error})"
    if "on_response" not in cycle_parameters:
        return "uvicorn's RequestResponseCycle takes no on_response callback"
    if list(hook_parameters) != ["self"]:
        return "uvicorn's on_response_complete takes arguments celld does not pass"
    return None


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    # celld's attributes carry its name: uvicorn's protocol has attributes of its own
    # (`connections`, `transport`, ...) that a plain name could shadow.
    #: the server's idle connections (one registry per server; see `guarded_protocol`)
    celld_idle: IdleConnections
    #: whether `on_response_complete` is the hook `uvicorn_hooks` checked
    celld_track_keep_alive = False
    _celld_transport: asyncio.Transport | None = None
    #: requests whose headers were read and whose response is not finished (more than one
    #: when a client pipelines)
    _celld_open_requests = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._celld_transport = transport
        self.celld_idle.opened(self)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.celld_idle.request_begun(self)

    def on_headers_complete(self) -> None:
        self._celld_open_requests += 1
        self.celld_idle.headers_read(self)
        super().on_headers_complete()
        # The request's task starts in the loop's next pass: workflow slices due meanwhile
        # wait for it (celld/isolate/inline.py), and a Worker turn it starts holds them on.
        turns = inline_turns()
        turns.hold()
        asyncio.get_running_loop().call_soon(turns.release)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.celld_track_keep_alive:
            return
        self._celld_open_requests = max(0, self._celld_open_requests - 1)
        transport = self._celld_transport
        if self._celld_open_requests == 0 and transport is not None and not transport.is_closing():
            self.celld_idle.idle_again(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.celld_idle.closed(self)
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        """The connection becomes a WebSocket (another protocol object serves it from now
        on): it leaves the registry, as its close is never told to this one."""
        self.celld_idle.closed(self)
        super().handle_websocket_upgrade()

    def close_idle(self) -> None:
        """Called by the registry: past the header deadline, or shed to make room."""
        transport = self._celld_transport
        if transport is not None and not transport.is_closing():
            transport.close()


def guarded_protocol(
    header_timeout: float,
    max_idle: int = MAX_IDLE_CONNECTIONS,
    max_open: int | None = None,
) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for one server: `header_timeout` seconds for request headers, at
    most `max_idle` idle connections and `max_open` open ones (None: no bound) before the
    oldest idle connection is closed."""
    problem = uvicorn_hooks()
    if problem is not None:
        log.warning(
            "%s: kept-alive connections are not counted as idle (uvicorn's keep-alive "
            "timeout closes them); the header deadline and the idle limit hold for the rest",
            problem,
        )
    registry = IdleConnections(header_timeout, max_idle, max_open)
    return type(
        "CelldHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"celld_idle": registry, "celld_track_keep_alive": problem is None},
    )
