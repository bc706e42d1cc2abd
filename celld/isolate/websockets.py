"""WebSockets: the host holds every socket; isolates only queue messages for them.

A socket is a pair of ends (``new WebSocketPair()`` in JS, or an outbound connection).
What one end sends, the other end receives; each end's events go to whoever accepted it,
its *sink*: an isolate (``accept()`` in a Worker), a Durable Object that may hibernate
(``ctx.acceptWebSocket``: the object is woken for each event, celld/objects/manager.py),
the client's HTTP connection (a 101 answer, celld/server/websocket.py) or an outside
server (``new WebSocket(url)``, ``fetch`` with ``Upgrade: websocket``). Events that
arrive before an end has a sink wait for it, in order.

Everything JS does to a socket is a message of its outbox (``ws.pair``, ``ws.accept``,
``ws.send``, ``ws.close``, ``ws.attach``, ``ws.auto``, ``ws.connect``), so it passes the
isolate's output gate (celld/isolate/gate.py) like a fetch: a Durable Object's send leaves
only once the writes of its turn have committed. An outbound connection is opened from
the dispatch of its message and keeps the dispatch's fence (OUTGOING_FENCE, as fetch's
sockets do): each frame it writes asks the fence first.

Limits as workerd's: a message received is at most 1 MiB (a larger one closes the
socket with 1009), an attachment at most 2,048 bytes (checked in JS).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pybase64

from celld.isolate.host import HostError, OpHandler
from celld.isolate.outbound import OUTGOING_FENCE

if TYPE_CHECKING:
    from celld.isolate.host import IsolateHost
    from celld.store.lease import EffectFence

log = logging.getLogger("celld.websockets")

#: workerd's limit on one received message.
MAX_MESSAGE_BYTES = 1 << 20
#: What an end still holds for a peer that does not read (its client stopped reading):
#: past it the socket is closed with 1009 rather than buffered without bound.
MAX_BUFFERED_BYTES = 16 << 20
#: workerd's close event for a peer that went away without a close frame.
GONE_REASON = "WebSocket disconnected without sending Close frame."
#: Events are dicts: {"ev": "message", "text"|"b64"}, {"ev": "close", "code", "reason",
#: "clean"} or {"ev": "error", "message"}.
Event = dict[str, Any]


class Sink(Protocol):
    """Where an end's events go."""

    def deliver(self, end: End, event: Event) -> None: ...


@dataclass(eq=False)
class End:
    id: str
    peer: End | None = None
    sink: Sink | None = None
    backlog: deque[Event] = field(default_factory=deque)
    #: this end sent a close / received one
    closed_out: bool = False
    closed_in: bool = False
    #: hibernatable ends: the object that accepted it, its tags, attachment and the
    #: time of the last auto-response (ms)
    owner: Any = None
    owner_name: str | None = None
    tags: list[str] = field(default_factory=list)
    attachment: Any = None
    auto_ts: int | None = None
    #: the Worker request that accepted it (its CPU is counted afresh for each message)
    request: Any = None

    @property
    def done(self) -> bool:
        return self.closed_in and self.closed_out


def message_event(data: str | bytes) -> Event:
    if isinstance(data, str):
        return {"ev": "message", "text": data}
    return {"ev": "message", "b64": pybase64.b64encode(data).decode()}


def event_data(event: Event) -> str | bytes:
    if "text" in event:
        return str(event["text"])
    return pybase64.b64decode(event.get("b64") or "")


def event_size(event: Event) -> int:
    if "text" in event:
        return len(event["text"])
    return len(event.get("b64") or "") * 3 // 4


class IsolateSink:
    """Events of the ends an isolate accepted with ``accept()``: posted to it as ``ws``
    messages (js/web/websocket.js dispatches them)."""

    def __init__(
        self,
        host: Callable[[], IsolateHost | None],
        on_event: Callable[[End, Event], None] | None = None,
    ) -> None:
        self._host = host
        self.ends: set[End] = set()
        self.on_event = on_event

    def deliver(self, end: End, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(end, event)
        host = self._host()
        if host is not None:
            host.post({"k": "ws", "ws": end.id, **event})


class SocketHub:
    """Every socket end of a celld process."""

    def __init__(self) -> None:
        self.ends: dict[str, End] = {}
        #: Durable Objects' auto-responses: owner -> (request, response)
        self.auto_responses: dict[Any, tuple[str, str]] = {}
        #: Durable Objects' setHibernatableWebSocketEventTimeout: owner -> ms (kept while the
        #: object hibernates, as its sockets are; celld.objects.live enforces it)
        self.event_timeouts: dict[Any, int] = {}
        #: called with (owner, end, event) for ends a Durable Object accepted to hibernate
        self.object_event: Callable[[Any, End, Event], None] | None = None
        #: set once celld is stopping: a socket closed by the shutdown wakes no object
        self.stopping = False
        #: told of an auto-response (the object, if live, learns its timestamp)
        self.auto_seen: Callable[[End], None] | None = None
        self._outbound: set[asyncio.Task[None]] = set()
        self.messages = 0

    # -- ends ---------------------------------------------------------------------------

    def pair(self, pair_id: str) -> tuple[End, End]:
        if not isinstance(pair_id, str) or not pair_id or ":" in pair_id:
            raise HostError("celld: a WebSocketPair needs an id", "TypeError")
        if f"{pair_id}:0" in self.ends:
            raise HostError(f"celld: WebSocketPair {pair_id} exists already", "TypeError")
        a, b = End(f"{pair_id}:0"), End(f"{pair_id}:1")
        a.peer, b.peer = b, a
        self.ends[a.id] = a
        self.ends[b.id] = b
        return a, b

    def end(self, end_id: Any) -> End:
        found = self.ends.get(end_id) if isinstance(end_id, str) else None
        if found is None:
            raise HostError(f"celld: no open WebSocket {end_id!r}", "TypeError")
        return found

    def attach(self, end: End, sink: Sink) -> None:
        """`sink` gets `end`'s events from now on, those that waited first."""
        end.sink = sink
        while end.backlog and end.sink is sink:
            sink.deliver(end, end.backlog.popleft())

    def send(self, end: End, event: Event) -> None:
        """`end` sends `event`: its peer receives it."""
        if event.get("ev") == "close":
            if end.closed_out:
                return
            end.closed_out = True
        peer = end.peer
        if peer is None or peer.closed_in:
            self._forget(end)
            return
        if event.get("ev") == "close":
            peer.closed_in = True
        else:
            self.messages += 1
        if peer.sink is None:
            peer.backlog.append(event)
        elif peer.sink is HIBERNATED:
            self._to_object(peer, event)
        else:
            peer.sink.deliver(peer, event)
        self._forget(end)

    def gone(self, end: End, code: int = 1006, reason: str = GONE_REASON) -> None:
        """`end`'s side went away (a connection dropped, an isolate stopped): its peer
        gets a close event that was not clean."""
        if end.closed_out:
            end.closed_in = True
            self._forget(end)
            return
        end.closed_in = True
        self.send(end, {"ev": "close", "code": code, "reason": reason, "clean": False})

    def _forget(self, end: End) -> None:
        peer = end.peer
        if end.done and (peer is None or peer.done):
            for gone in (end, peer):
                if gone is None:
                    continue
                self.ends.pop(gone.id, None)
                if isinstance(gone.sink, IsolateSink):
                    gone.sink.ends.discard(gone)

    # -- Durable Objects that hibernate ---------------------------------------------------

    def _to_object(self, end: End, event: Event) -> None:
        auto = self.auto_responses.get(end.owner)
        if auto is not None and event.get("ev") == "message" and event.get("text") == auto[0]:
            # Answered here: the object is not woken (workerd's auto-response).
            end.auto_ts = int(time.time() * 1000)
            self.send(end, {"ev": "message", "text": auto[1]})
            if self.auto_seen is not None:
                self.auto_seen(end)
            return
        assert self.object_event is not None
        if event.get("ev") == "close" and self.stopping:
            return  # celld is going away: the object is not woken for it
        self.object_event(end.owner, end, event)

    def sockets_of(self, owner: Any) -> list[dict[str, Any]]:
        """What a waking object needs to rebuild its hibernatable sockets."""
        return [
            {
                "id": end.id,
                "tags": end.tags,
                "attachment": end.attachment,
                "ts": end.auto_ts,
                "closedIn": end.closed_in,
                "closedOut": end.closed_out,
            }
            for end in self.ends.values()
            if end.owner == owner and end.sink is HIBERNATED and not end.done
        ]

    # -- the host operations ----------------------------------------------------------------

    def ops(
        self,
        sink: Callable[[], Sink],
        owner: Any = None,
        owner_name: Callable[[], str | None] | None = None,
    ) -> dict[str, OpHandler]:
        """The ``ws.*`` operations of one isolate: ``accept()`` sends events to `sink()`;
        an object's isolate (`owner`) may also accept to hibernate."""

        def op_pair(message: dict[str, Any]) -> None:
            self.pair(message.get("id"))  # type: ignore[arg-type]

        def op_accept(message: dict[str, Any]) -> None:
            end = self.end(message.get("ws"))
            if message.get("hib"):
                if owner is None:
                    raise HostError("ctx.acceptWebSocket() is for Durable Objects", "TypeError")
                end.owner = owner
                end.owner_name = owner_name() if owner_name is not None else None
                tags = message.get("tags") or []
                end.tags = [str(t) for t in tags]
                self._attach_hibernated(end)
                return
            target = sink()
            end.request = message.get("rid")
            if isinstance(target, IsolateSink):
                target.ends.add(end)
            self.attach(end, target)

        def op_send(message: dict[str, Any]) -> None:
            end = self.end(message.get("ws"))
            if end.closed_out:
                return
            if "text" in message:
                self.send(end, {"ev": "message", "text": str(message["text"])})
            else:
                self.send(end, {"ev": "message", "b64": str(message.get("b64") or "")})

        def op_close(message: dict[str, Any]) -> None:
            end = self.ends.get(message.get("ws"))  # type: ignore[arg-type]
            if end is None:
                return
            code = message.get("code")
            self.send(
                end,
                {
                    "ev": "close",
                    "code": code if isinstance(code, int) else 1005,
                    "reason": str(message.get("reason") or ""),
                    "clean": True,
                },
            )

        def op_attach(message: dict[str, Any]) -> None:
            self.end(message.get("ws")).attachment = message.get("value")

        def op_auto(message: dict[str, Any]) -> None:
            if owner is None:
                raise HostError("setWebSocketAutoResponse() is for Durable Objects", "TypeError")
            pair = message.get("pair")
            if pair is None:
                self.auto_responses.pop(owner, None)
            else:
                self.auto_responses[owner] = (str(pair[0]), str(pair[1]))

        def op_timeout(message: dict[str, Any]) -> None:
            if owner is None:
                raise HostError(
                    "setHibernatableWebSocketEventTimeout() is for Durable Objects", "TypeError"
                )
            ms = message.get("ms")
            if isinstance(ms, int) and ms > 0:
                self.event_timeouts[owner] = ms
            else:
                self.event_timeouts.pop(owner, None)

        return {
            "ws.pair": op_pair,
            "ws.accept": op_accept,
            "ws.send": op_send,
            "ws.close": op_close,
            "ws.attach": op_attach,
            "ws.auto": op_auto,
            "ws.timeout": op_timeout,
            "ws.connect": self.op_connect,
        }

    def _attach_hibernated(self, end: End) -> None:
        end.sink = HIBERNATED
        while end.backlog:
            self._to_object(end, end.backlog.popleft())

    def isolate_gone(self, sink: IsolateSink) -> None:
        """The isolate behind `sink` stopped: its sockets' peers see them go away."""
        for end in list(sink.ends):
            if end.sink is sink:
                end.sink = None
                self.gone(end, 1011, "the isolate that accepted this WebSocket stopped")
        sink.ends.clear()

    # -- outbound ---------------------------------------------------------------------------

    async def op_connect(self, message: dict[str, Any]) -> dict[str, Any]:
        """Open a WebSocket to an outside server; JS gets the end to accept."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus

        url = str(message.get("url") or "")
        if url.startswith("http://"):
            url = "ws://" + url[len("http://") :]
        elif url.startswith("https://"):
            url = "wss://" + url[len("https://") :]
        skip = {
            "upgrade", "connection", "sec-websocket-key", "sec-websocket-version",
            "sec-websocket-extensions", "host", "content-length", "sec-websocket-protocol",
        }  # fmt: skip
        headers = [
            (str(k), str(v)) for k, v in message.get("headers") or [] if k.lower() not in skip
        ]
        protocols = [
            p.strip()
            for k, v in message.get("headers") or []
            if k.lower() == "sec-websocket-protocol"
            for p in str(v).split(",")
            if p.strip()
        ]
        fence = OUTGOING_FENCE.get()
        if fence is not None and not fence.allows_effects():
            raise HostError("not connected: this node's lease lapsed", "Error")
        try:
            connection = await connect(
                url,
                additional_headers=headers,
                subprotocols=protocols or None,  # type: ignore[arg-type]
                max_size=MAX_MESSAGE_BYTES,
                open_timeout=30,
            )
        except InvalidStatus as error:
            raise HostError(
                f"WebSocket upgrade failed: {url} answered {error.response.status_code}",
                "TypeError",
            ) from None
        except (InvalidHandshake, OSError, TimeoutError) as error:
            raise HostError(f"WebSocket connection to {url} failed: {error}", "TypeError") from None
        pair_id = f"out-{id(connection):x}-{time.monotonic_ns():x}"
        mine, theirs = self.pair(pair_id)
        outbound = OutboundSink(self, theirs, connection, fence)
        self.attach(theirs, outbound)
        task = asyncio.get_running_loop().create_task(outbound.run())
        self._outbound.add(task)
        task.add_done_callback(self._outbound_done)
        response = connection.response
        return {
            "ws": mine.id,
            "status": 101,
            "protocol": connection.subprotocol or "",
            "headers": [[k, v] for k, v in response.headers.raw_items()] if response else [],
        }

    def _outbound_done(self, task: asyncio.Task[None]) -> None:
        self._outbound.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("an outbound WebSocket failed", exc_info=task.exception())

    async def close_all(self, code: int, reason: str) -> None:
        """Stop: outbound connections are closed with `code` (the client connections are
        closed by the server's own shutdown)."""
        self.stopping = True
        for task in list(self._outbound):
            task.cancel()
        if self._outbound:
            await asyncio.wait(list(self._outbound), timeout=2)


class _Hibernated:
    """The sink of ends a Durable Object accepted to hibernate (see `SocketHub._to_object`)."""

    def deliver(self, end: End, event: Event) -> None:  # pragma: no cover - never called
        raise AssertionError("hibernated ends are delivered through SocketHub._to_object")


HIBERNATED = _Hibernated()


class OutboundSink:
    """An end whose other side is an outside server (the `websockets` client)."""

    def __init__(self, hub: SocketHub, end: End, connection: Any, fence: EffectFence | None):
        self.hub = hub
        self.end = end
        self.connection = connection
        self.fence = fence
        self._queue: asyncio.Queue[Event] = asyncio.Queue()

    def deliver(self, end: End, event: Event) -> None:
        self._queue.put_nowait(event)

    async def run(self) -> None:
        writer = asyncio.get_running_loop().create_task(self._write())
        from websockets.exceptions import ConnectionClosed

        try:
            async for data in self.connection:
                self.hub.send(self.end, message_event(data))
        except ConnectionClosed:
            pass
        except asyncio.CancelledError:
            await self.connection.close(1012, "service restart")
            raise
        finally:
            writer.cancel()
            received = self.connection.protocol.close_rcvd
            if received is not None:
                self.hub.send(
                    self.end,
                    {
                        "ev": "close",
                        "code": received.code,
                        "reason": received.reason,
                        "clean": True,
                    },
                )
            else:
                self.hub.gone(self.end)

    async def _write(self) -> None:
        while True:
            event = await self._queue.get()
            if self.fence is not None and not self.fence.allows_effects():
                log.warning("a WebSocket message was not sent: this node's lease lapsed")
                await self.connection.close(1011, "lease lapsed")
                return
            if event.get("ev") == "close":
                code = event.get("code")
                await self.connection.close(
                    code if isinstance(code, int) and code != 1005 else 1000,
                    event.get("reason") or "",
                )
                return
            await self.connection.send(event_data(event))
