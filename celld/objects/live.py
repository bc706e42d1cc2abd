"""A live object: its isolate, the host that pumps it, its storage and the calls in flight.

The isolate runs the Worker's whole program (so the object sees the same modules and
``env`` as the Worker) and builds one instance of the object's class on its first event
(js/objects/object.js). Calls arrive as ``do.call`` messages and leave as ``do.result``
notifications, which the host dispatches only after the turn's storage commit: the
output gate. An object whose isolate faults fails every call in flight and is dropped;
its storage keeps what was committed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from celld.isolate.host import HostError, IsolateHost, OpHandler
from celld.isolate.isolate import CPU_LIMIT_REASON, Isolate, IsolateFault, Limits
from celld.isolate.program import Program
from celld.isolate.threads import JsThread
from celld.isolate.websockets import IsolateSink, SocketHub
from celld.objects.ids import ObjectRef
from celld.objects.storage import ObjectStorage

if TYPE_CHECKING:
    from celld.store.lease import Fence

log = logging.getLogger("celld.objects")

CPU_MESSAGE = "Durable Object exceeded its CPU time limit and was reset."
#: workerd's error for a hibernatable WebSocket handler that outran
#: ctx.setHibernatableWebSocketEventTimeout(): the object is reset.
EVENT_TIMEOUT_MESSAGE = "Actor exceeded event execution time and was disconnected."


def fault_message(fault: IsolateFault) -> str:
    if fault.reason == CPU_LIMIT_REASON:
        return CPU_MESSAGE
    return f"Durable Object was reset: {fault.reason}"


class LiveObject:
    def __init__(
        self,
        ref: ObjectRef,
        name: str | None,
        storage: ObjectStorage,
        on_gone: Callable[[LiveObject], None],
    ) -> None:
        self.ref = ref
        self.name = name
        self.storage = storage
        self.on_gone = on_gone
        self.isolate: Isolate | None = None
        self.host: IsolateHost | None = None
        self.calls: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self.broken: str | None = None
        self.last_used = time.monotonic()
        #: The alarm time whose alarm() handler runs now (getAlarm() reads null then).
        self.running_alarm: int | None = None
        self.idle_timer: Any = None
        #: Events not yet delivered: one starts per turn (see `_deliver_next`).
        self._queue: list[dict[str, Any]] = []
        self._delivering: dict[str, Any] | None = None  # posted, its turn not yet over
        #: sockets accepted with accept() (not to hibernate): they keep the object live
        self.socket_sink = IsolateSink(lambda: self.host)
        self.sockets: SocketHub | None = None
        #: the node's lease as of activation (a shared store): no turn runs and nothing
        #: leaves while it says no, and nothing ever again once the node rejoined
        self.fence: Fence | None = None
        #: (ms, callback) -> a cancellable timer on the service's clock: the bound of a
        #: hibernatable WebSocket event (setHibernatableWebSocketEventTimeout) runs on it
        self.call_later: Callable[[int, Callable[[], None]], Any] | None = None
        self._event_timers: dict[int, Any] = {}

    async def start(
        self,
        thread: JsThread,
        program: Program,
        limits: Limits,
        ops: Mapping[str, OpHandler],
        env_message: dict[str, Any],
        sockets: SocketHub | None = None,
    ) -> None:
        isolate = Isolate(
            thread,
            limits,
            callables={"__celld_do_storage": self.storage.call},
            turn_end=self.storage.end_turn,
        )
        await isolate.load([program.script])
        own = dict(ops)
        own["do.result"] = self._on_result
        self.sockets = sockets
        if sockets is not None:
            own.update(
                sockets.ops(lambda: self.socket_sink, owner=self.ref, owner_name=lambda: self.name)
            )
        own["fault"] = lambda message: log.error(
            "error in the runtime's %s handler of Durable Object %s: %s",
            message.get("kind"),
            self.ref,
            program.lines.rewrite(str(message.get("error"))),
        )
        if "log" in own:
            base_log = own["log"]

            def located_log(message: dict[str, Any]) -> Any:
                # console output with stack positions in the Worker's own files and lines
                text = message.get("text")
                if isinstance(text, str) and "<input>:" in text:
                    message = {**message, "text": program.lines.rewrite(text)}
                return base_log(message)

            own["log"] = located_log
        host = IsolateHost(isolate, own, on_fault=self._on_fault)
        host.turn_callback = self._turn_done
        host.fence = self.fence
        self.isolate, self.host = isolate, host
        host.post({"k": "env", **env_message})
        host.post(
            {
                "k": "do.init",
                "cls": self.ref.cls,
                "id": self.ref.id,
                "name": self.name,
                "sqlite": self.storage.sqlite,
                # hibernatable sockets still open: the object wakes with them
                "sockets": sockets.sockets_of(self.ref) if sockets is not None else [],
                "eventTimeout": sockets.event_timeouts.get(self.ref) if sockets else None,
            }
        )

    @property
    def active(self) -> int:
        return len(self.calls)

    @property
    def idle(self) -> bool:
        return (
            not self.calls
            and (self.host is None or not self.host.busy)
            and all(end.done for end in self.socket_sink.ends)
        )

    async def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Deliver one event (an RPC call, a fetch, an alarm) and wait for its result."""
        if self.broken is not None or self.host is None:
            raise HostError(self.broken or "Durable Object is not running")
        self.last_used = time.monotonic()
        call_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.calls[call_id] = future
        self._queue.append({**message, "k": "do.call", "c": call_id})
        self._deliver_next()
        try:
            return await future
        finally:
            self.calls.pop(call_id, None)
            timer = self._event_timers.pop(call_id, None)
            if timer is not None:
                timer.cancel()
            self.last_used = time.monotonic()
            # The turn that answered ended while this call still counted, so the host's
            # idle notice came too early to count: give it again now that the call is done.
            host = self.host
            if self.idle and host is not None and host.idle_callback is not None:
                host.idle_callback()

    def _deliver_next(self) -> None:
        """Input gate: an event starts in a turn of its own, so every event that came before
        it has run until it waits on something outside the object (a fetch, a timer, another
        object). Storage calls answer within the turn, so the event that made them goes on
        before another starts, as workerd holds events back while storage works."""
        if self._delivering is not None or not self._queue or self.host is None:
            return
        self._delivering = self._queue.pop(0)
        self._bound(self._delivering)
        self.host.post(self._delivering)

    def _bound(self, message: dict[str, Any]) -> None:
        """A hibernatable WebSocket event starts: if the object set an event timeout, it is
        reset should the handler still run when the timeout passes (workerd cancels the
        handler and shuts the object down: its in-memory state is lost, its hibernatable
        sockets stay open and the next event wakes a new instance)."""
        if message.get("kind") != "ws" or self.sockets is None or self.call_later is None:
            return
        ms = self.sockets.event_timeouts.get(self.ref)
        if ms is None:
            return
        call_id = message["c"]
        self._event_timers[call_id] = self.call_later(ms, lambda: self._timed_out(call_id))

    def _timed_out(self, call_id: int) -> None:
        self._event_timers.pop(call_id, None)
        future = self.calls.get(call_id)
        if future is None or future.done() or self.broken is not None:
            return
        log.warning(
            "Durable Object %s was reset: a WebSocket event handler ran past its %s ms "
            "event timeout",
            self.ref,
            self.sockets.event_timeouts.get(self.ref) if self.sockets is not None else "?",
        )
        self._reset(EVENT_TIMEOUT_MESSAGE)

    def _turn_done(self) -> None:
        pending = self._delivering
        if pending is not None and self.host is not None and self.host.queued(pending):
            return  # posted during this turn: the next turn delivers it
        self._delivering = None
        self._deliver_next()

    def _on_result(self, message: dict[str, Any]) -> None:
        future = self.calls.get(message.get("c"))  # type: ignore[arg-type]
        if future is not None and not future.done():
            future.set_result(message)

    def _on_fault(self, fault: IsolateFault) -> None:
        log.warning("Durable Object %s was reset: %s %s", self.ref, fault.reason, fault.detail)
        self._reset(fault_message(fault))

    def _reset(self, message: str) -> None:
        """Fail every call in flight with `message` and drop the object (its storage keeps
        what was committed; the next event starts it afresh)."""
        self.broken = message
        for timer in self._event_timers.values():
            timer.cancel()
        self._event_timers.clear()
        for future in self.calls.values():
            if not future.done():
                future.set_exception(HostError(self.broken))
        self.on_gone(self)

    def submit(self, message: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        """`call` without waiting: the event is queued now, in the order submitted."""
        return asyncio.ensure_future(self.call(message))

    async def close(self) -> None:
        """Free the isolate and the storage connection (storage stays on disk)."""
        if self.sockets is not None:
            self.sockets.isolate_gone(self.socket_sink)
        if self.host is not None:
            await self.host.close()
            self.host = None
        for future in self.calls.values():
            if not future.done():
                future.set_exception(HostError("Durable Object was evicted while a call waited"))
        await asyncio.to_thread(self.storage.close)
