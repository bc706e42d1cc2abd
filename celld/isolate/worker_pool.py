"""A pool of isolates that serve a Worker's fetch handler.

Requests go to the isolate with the fewest requests in flight; an isolate serves
many requests at once (they interleave at awaits, as in workerd). When an isolate
faults (CPU or memory limit, stack overflow, a broken bridge), every request it was
serving fails with a 500 and a fresh isolate takes its place (requests queued for it
that it never saw go to another isolate); other isolates are untouched.

CPU: every turn's CPU time is shared out among the requests the isolate is serving
(a request is served until its response is sent and its waitUntil() work settled).
A request whose share passes `limits.cpu_ms` stops the isolate with Cloudflare's
"Worker exceeded CPU time limit." error; a loop that never lets the isolate go idle
is stopped by the isolate's own streak limit (see isolate.py).

Waiting behind runaway JS is bounded: a turn yields its thread after one slice, so
a loop of short jobs only slows its neighbours down; a single long job holds its
thread for at most `cpu_ms`, and meanwhile new requests avoid the isolates whose
turn has been waiting for more than `STALL_S`: they go to another isolate, or to a
spare isolate on a spare thread when all of them are stuck (at most `size` spares).
Requests already queued for a stuck isolate but not yet delivered move the same way.

A request that lands in an isolate shares its fate: when a neighbour passes its CPU
limit, the whole isolate stops and every request in it fails. So new requests also
avoid an isolate serving a request that has used more than `DOOMED_SHARE` of its CPU
limit (a loop of short jobs never stalls its isolate, but it is on its way to
stopping it): a quick request then never lands in an isolate about to be stopped.

Turns run on the isolates' JS threads, except a short request reaching an idle isolate
while it is the Worker's only request in flight, which turns on the event loop where it
is handed over (`_may_inline`; a turn there that runs too long is stopped, and its
requests start over on a JS thread), and the answers to such requests' reads
(`_answers_may_inline`), under the same rule. Only a lone request: with several in
flight, a JS thread takes their messages in one turn where the loop would turn for each
of them, and the loop is then what limits the server (bench/PROFILE.md).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from celld.isolate.host import HostError, IsolateHost, OpHandler
from celld.isolate.isolate import CPU_LIMIT_REASON, Isolate, IsolateFault, Limits
from celld.isolate.program import Program
from celld.isolate.streams import STREAMS, StreamAborted
from celld.isolate.threads import JsThread, JsThreadPool
from celld.isolate.websockets import End, IsolateSink, SocketHub

log = logging.getLogger("celld.worker")

HUNG_MESSAGE = (
    "The Workers runtime canceled this request because it detected that your "
    "Worker's code had hung and would never generate a response."
)
#: Cloudflare's error for a request that ran past its CPU limit.
CPU_MESSAGE = "Worker exceeded CPU time limit."
#: A turn queued this long (s) marks its isolate as stuck: new requests go elsewhere.
STALL_S = 0.25
#: The share of its CPU limit past which a request marks its isolate as doomed.
DOOMED_SHARE = 0.5
#: How often (s) the watchdog looks for stuck isolates while requests are waiting.
WATCHDOG_S = 0.1
#: A request reaching an idle isolate turns on the event loop (see `_may_inline`) while
#: the Worker's recent turns stay under this much CPU (ms) ...
INLINE_TURN_MS = 1.0
#: ... the recent peak decaying by this factor with each turn ...
PEAK_DECAY = 0.9
#: ... and while the Worker has at most this many requests in flight: under concurrent
#: load, turns on the loop each take one request's message where a JS thread's turn takes
#: several, and cost the loop more than the crossings they save (bench/PROFILE.md).
INLINE_MAX_IN_FLIGHT = 1


@dataclass
class WireResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    #: A body that streams (celld/isolate/streams.py) instead of `body`, and its length
    #: when known in advance.
    stream: AsyncIterator[bytes] | None = None
    length: int | None = None
    #: Called once the HTTP exchange is over: None when all of the body was sent, else why
    #: it stopped (the client went away). It frees what the request still holds.
    release: Callable[[str | None], None] = lambda _: None
    #: A 101 answer's WebSocket: the host id of the end the client's connection gets
    #: (celld/isolate/websockets.py).
    web_socket: str | None = None


@dataclass
class ScheduledOutcome:
    """How a scheduled event went: workerd's `outcome` ("ok" or "exception"), whether
    the handler called `noRetry()`, and the error it threw."""

    outcome: str
    no_retry: bool
    error: WorkerError | None


class WorkerError(Exception):
    """A request failed inside the Worker; `stack` is already mapped to real files."""

    def __init__(self, name: str, message: str, stack: str = "") -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message
        self.stack = stack


@dataclass
class _Slot:
    isolate: Isolate
    host: IsolateHost
    #: Requests waiting for their response.
    pending: dict[int, asyncio.Future[WireResponse]] = field(default_factory=dict)
    #: Requests the isolate still serves (response not sent, or waitUntil work left)
    #: and the CPU time (ms) charged to each so far.
    live: dict[int, float] = field(default_factory=dict)
    #: Responses whose body JS is still streaming: request id -> pipe id.
    streams: dict[int, str] = field(default_factory=dict)
    spare: bool = False
    #: the sockets this isolate accepted
    sockets: IsolateSink | None = None
    #: the requests of the turn last let run on the event loop (see `_may_inline`)
    inline_batch: list[dict[str, Any]] | None = None
    #: While every request the isolate serves could start over (`_may_inline`): their
    #: messages, by request id. None once one of them sent something other than a read.
    replay: dict[int, dict[str, Any]] | None = None
    #: the host's `turns_away` when `replay` was taken (a turn since then ran on the thread)
    replay_away: int = 0

    def stalled(self, now: float) -> bool:
        queued = self.isolate.turn_queued_at
        return queued is not None and now - queued > STALL_S

    def avoided(self, now: float, cpu_limit_ms: float) -> bool:
        """New requests go elsewhere: the isolate is stuck behind a long turn, or one of
        its requests is well on its way to stopping it."""
        if self.stalled(now):
            return True
        doomed_at = cpu_limit_ms * DOOMED_SHARE
        return any(used > doomed_at for used in self.live.values())


def _declared_length(headers: list[tuple[str, str]]) -> int | None:
    """A request's Content-Length (None: none, or the body is chunked)."""
    length = None
    for name, value in headers:
        lowered = name.lower()
        if lowered == "transfer-encoding":
            return None
        if lowered == "content-length" and value.strip().isdigit():
            length = int(value)
    return length


#: Workflow binding methods that only read: done twice, they change nothing.
_READ_METHODS = frozenset({"get", "status"})


def _is_read(message: dict[str, Any]) -> bool:
    """Whether a message JS sent only reads (a request that sent nothing else may start
    over, see `WorkerPool._answers_may_inline`)."""
    return message.get("op") == "wf.binding" and message.get("method") in _READ_METHODS


def fault_error(fault: IsolateFault, detail: str) -> WorkerError:
    """The error a request sees when its isolate stops."""
    if fault.reason == CPU_LIMIT_REASON:
        return WorkerError("Error", CPU_MESSAGE, detail)
    return WorkerError("Error", f"Worker exceeded a limit: {fault.reason}", detail)


class WorkerPool:
    """Serves wire requests through N isolates of one Worker program."""

    def __init__(
        self,
        program: Program,
        threads: JsThreadPool,
        ops: Mapping[str, OpHandler],
        env_message: dict[str, Any],
        *,
        size: int | None = None,
        limits: Limits | None = None,
        on_setup: Callable[[IsolateHost], None] | None = None,
        sockets: SocketHub | None = None,
    ) -> None:
        self.program = program
        self.threads = threads
        self.ops = dict(ops)
        self.env_message = env_message
        self.size = size or len(threads.threads)
        self.limits = limits or Limits()
        self.sockets = sockets
        self._slots: list[_Slot] = []
        self._slot_ready = asyncio.Event()
        self._next_id = 0
        self._spare_threads: list[JsThread] = []
        self._spawning: asyncio.Task[_Slot | None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        #: replacements and closes of failed isolates: owned, their failures logged
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        #: the largest CPU (ms) of the Worker's recent turns, decaying (see `_may_inline`)
        self._turn_peak_ms = 0.0
        #: one of its turns was stopped on the event loop: all of them run on JS threads
        self._long_turns = False
        #: turns of isolates no longer in the pool (see `turns`)
        self._retired_turns = (0, 0)

    @property
    def turns(self) -> tuple[int, int]:
        """The Worker's turns so far: (run on the event loop, handed to a JS thread). Each
        of the latter is a crossing to the thread and back (bench/PROFILE.md)."""
        here, away = self._retired_turns
        for slot in self._slots:
            here += slot.host.turns_here
            away += slot.host.turns_away
        return here, away

    async def start(self) -> None:
        self._slots = [await self._new_slot() for _ in range(self.size)]
        self._slot_ready.set()

    async def _new_slot(self, thread: JsThread | None = None) -> _Slot:
        isolate = Isolate(thread or self.threads.pick(), self.limits)
        await isolate.load([self.program.script])
        slot: _Slot
        ops = dict(self.ops)
        ops["respond"] = lambda message: self._on_respond(slot, message)
        if "log" in ops:
            ops["log"] = self._locating_log(ops["log"])
        ops["done"] = lambda message: self._on_done(slot, message)
        ops["fault"] = lambda message: self._on_js_fault(message)
        sink: IsolateSink | None = None
        if self.sockets is not None:
            sink = IsolateSink(lambda: slot.host, lambda end, event: self._socket_event(slot, end))
            ops.update(self.sockets.ops(lambda: sink))  # type: ignore[arg-type, return-value]
        host = IsolateHost(isolate, ops, on_fault=lambda fault: self._on_fault(slot, fault))
        host.prompt = True  # a client waits on every turn (see IsolateHost.prompt)
        host.prompt_inline = lambda batch: self._may_inline(slot, batch)
        host.sent_callback = lambda message: self._sent(slot, message)
        slot = _Slot(isolate, host, spare=thread is not None, sockets=sink)
        host.post({"k": "env", **self.env_message})
        host.idle_callback = lambda: self._check_hung(slot)
        host.cpu_callback = lambda ms: self._charge(slot, ms)
        return slot

    async def handle(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes | AsyncIterator[bytes],
    ) -> WireResponse:
        """Serve one request. `body` is the whole body, or an async iterator of its chunks
        that the Worker pulls as it reads (large bodies are never held whole here)."""
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[WireResponse] = asyncio.get_running_loop().create_future()
        wire: dict[str, Any] = {"method": method, "url": url, "headers": headers, "body": None}
        body_id: str | None = None
        if isinstance(body, bytes):
            wire["body"] = base64.b64encode(body).decode() if body else None
        else:
            # JS reads it piece by piece as the Worker consumes it (or hands it on whole,
            # with its declared length).
            body_id = wire["stream"] = STREAMS.add_source(body, length=_declared_length(headers))
        message = {"k": "fetch", "id": request_id, "request": wire}
        try:
            slot = await self._pick()
            self._dispatch(slot, request_id, future, message)
            self._ensure_watchdog()
            answer = await future
        except BaseException:
            if body_id is not None:
                STREAMS.discard_source(body_id)
            raise
        answer.release = lambda reason: self._release(request_id, body_id, reason)
        return answer

    def _release(self, request_id: int, body_id: str | None, reason: str | None) -> None:
        """The HTTP exchange of `request_id` is over (`reason`: why its body stopped early)."""
        if body_id is not None:
            STREAMS.discard_source(body_id)
        for slot in self._slots:
            pipe = slot.streams.pop(request_id, None)
            if pipe is None:
                continue
            STREAMS.release_pipe(pipe, reason)
            if reason is not None and request_id in slot.live:
                # Its client went away mid-body: the request ends (timers, fetches, pulls).
                slot.host.post({"k": "drop", "id": request_id})
            return

    async def scheduled(self, cron: str, scheduled_time: int) -> ScheduledOutcome:
        """Fire the Worker's scheduled() handler once (what `wrangler dev` does for
        /cdn-cgi/handler/scheduled and, with --test-scheduled, /__scheduled)."""
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[WireResponse] = asyncio.get_running_loop().create_future()
        message = {
            "k": "fetch",
            "id": request_id,
            "scheduled": {"cron": cron, "scheduledTime": scheduled_time},
        }
        slot = await self._pick()
        self._dispatch(slot, request_id, future, message)
        self._ensure_watchdog()
        answer = orjson.loads((await future).body)
        error = answer.get("error")
        if error is not None:
            stack = self.program.lines.rewrite(error.get("stack", ""))
            error = WorkerError(error.get("name", "Error"), error.get("message", ""), stack)
        return ScheduledOutcome(answer["outcome"], bool(answer.get("noRetry")), error)

    async def export_names(self) -> frozenset[str]:
        """The names the Worker's main module exports, read from one of its isolates (each
        loaded the same program): what bindings from other Workers may name as entrypoints."""
        slot = await self._pick()
        text = await slot.isolate.eval("JSON.stringify(Object.keys(globalThis.__celld_main ?? {}))")
        return frozenset(orjson.loads(text))

    async def call_entrypoint(self, call: dict[str, Any]) -> dict[str, Any]:
        """Serve one service binding call from another isolate: ``{entrypoint, kind:
        "fetch", request}`` or ``{entrypoint, kind: "call", method, args}``, answered as JS
        answers it: ``{response}``, ``{v}`` (the structured-cloned result) or ``{e}`` (the
        error thrown, cloned). It is a request like any other: it gets a CPU limit, is moved
        off a stuck isolate, and its waitUntil() work runs on after the answer."""
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[WireResponse] = asyncio.get_running_loop().create_future()
        slot = await self._pick()
        self._dispatch(slot, request_id, future, {"k": "fetch", "id": request_id, "rpc": call})
        self._ensure_watchdog()
        answer: dict[str, Any] = orjson.loads((await future).body)
        return answer

    async def queue(
        self, queue: str, messages: list[dict[str, Any]], metadata: dict[str, Any]
    ) -> dict[str, Any]:
        """Deliver one batch to the Worker's queue() handler; what the handler said about
        it (js/bindings/queue.js). A handler that threw is logged as an uncaught error."""
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[WireResponse] = asyncio.get_running_loop().create_future()
        batch = {"name": queue, "messages": messages, "metadata": metadata}
        message = {"k": "fetch", "id": request_id, "queue": batch}
        slot = await self._pick()
        self._dispatch(slot, request_id, future, message)
        self._ensure_watchdog()
        answer: dict[str, Any] = orjson.loads((await future).body)
        error = answer.get("error")
        if error is not None:
            stack = self.program.lines.rewrite(error.get("stack", ""))
            log.error(
                "queue(%r): Uncaught %s: %s\n%s",
                queue, error.get("name", "Error"), error.get("message", ""), stack,
            )  # fmt: skip
        return answer

    def _dispatch(
        self,
        slot: _Slot,
        request_id: int,
        future: asyncio.Future[WireResponse],
        message: dict[str, Any],
    ) -> None:
        slot.pending[request_id] = future
        slot.live[request_id] = 0.0
        slot.host.post(message)

    async def _pick(self) -> _Slot:
        """The least busy isolate that is not stuck behind a long turn; a spare one when
        every isolate is stuck."""
        while True:
            while not self._slots:  # every isolate faulted at once: wait for a replacement
                self._slot_ready.clear()
                await self._slot_ready.wait()
            now = time.monotonic()
            healthy = [s for s in self._slots if not s.avoided(now, self.limits.cpu_ms)]
            if healthy:
                return min(healthy, key=lambda s: len(s.pending))
            spare = await self._spare()
            if spare is not None:
                return spare
            return min(self._slots, key=lambda s: len(s.pending))

    async def _spare(self) -> _Slot | None:
        """Start (or join the start of) one more isolate on a thread of its own."""
        if self._spawning is None:
            if sum(1 for s in self._slots if s.spare) >= self.size:
                return None
            self._spawning = asyncio.get_running_loop().create_task(self._spawn_spare())
        task = self._spawning
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self._spawning is task:
                self._spawning = None

    async def _spawn_spare(self) -> _Slot | None:
        now = time.monotonic()
        busy = {s.isolate.thread for s in self._slots if s.avoided(now, self.limits.cpu_ms)}
        thread = next((t for t in self._spare_threads if t not in busy), None)
        if thread is None:
            if len(self._spare_threads) >= self.size:
                return None
            thread = JsThread(f"celld-spare-{len(self._spare_threads)}")
            self._spare_threads.append(thread)
        try:
            slot = await self._new_slot(thread)
        except Exception:
            log.exception("could not start a spare Worker isolate")
            return None
        if self._closed:
            await slot.host.close()
            return None
        log.warning("every Worker isolate is busy with a long turn; started a spare one")
        self._slots.append(slot)
        self._slot_ready.set()
        return slot

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """While requests wait, move those not yet delivered off isolates that are stuck."""
        while not self._closed and any(s.pending for s in self._slots):
            await asyncio.sleep(WATCHDOG_S)
            now = time.monotonic()
            for slot in list(self._slots):
                if not slot.avoided(now, self.limits.cpu_ms):
                    continue
                # Every moved request leaves the stuck isolate's books before the first
                # await below: while a new home is picked, that isolate may go idle, and a
                # request it still listed but no longer held would be declared hung.
                for request_id, future, message in self._take_undelivered(slot):
                    target = await self._pick()
                    self._dispatch(target, request_id, future, message)

    @staticmethod
    def _take_undelivered(
        slot: _Slot,
    ) -> list[tuple[int, asyncio.Future[WireResponse], dict[str, Any]]]:
        """Take the requests `slot`'s isolate has not seen off its inbox and its books (at
        once, so that the isolate going idle meanwhile cannot declare them hung); those
        still awaited, to be dispatched elsewhere."""
        moved = []
        for message in slot.host.take_undelivered("fetch"):
            request_id = int(message["id"])
            future = slot.pending.pop(request_id, None)
            slot.live.pop(request_id, None)
            if future is not None and not future.done():
                moved.append((request_id, future, message))
        return moved

    # -- answers from JS -------------------------------------------------------------

    def _socket_event(self, slot: _Slot, end: End) -> None:
        """A WebSocket event for a request: its CPU limit counts afresh, as workerd's does
        for each message."""
        if end.request in slot.live:
            slot.live[end.request] = 0.0

    def _on_done(self, slot: _Slot, message: dict[str, Any]) -> None:
        """JS finished a request: its response is out and its waitUntil work settled."""
        slot.live.pop(message.get("id"), None)  # type: ignore[arg-type]

    def _may_inline(self, slot: _Slot, batch: list[dict[str, Any]]) -> bool:
        """Whether `batch` may turn on the event loop rather than on the isolate's JS
        thread (IsolateHost.prompt_inline): the hand-off to the thread and back costs more
        than a short turn itself (bench/PROFILE.md, "The fixed cost of a Worker request").

        Only where stopping the turn harms nothing: the batch is new requests whose bodies
        are in their messages and the isolate serves nothing else, so a turn stopped at
        the inline limit (its outbox dropped: it sent nothing out) has touched only this
        isolate, which is replaced, and the requests start over on a JS thread
        (`_on_fault`); or the batch is answers to requests that could all start over so
        (`_answers_may_inline`). And only while the Worker's recent turns were short, and
        none was ever stopped: a CPU-bound Worker holds the loop for at most one such turn;
        and while it is the Worker's only request in flight (`INLINE_MAX_IN_FLIGHT`)."""
        slot.inline_batch = None
        if (
            self._long_turns
            or self._turn_peak_ms > INLINE_TURN_MS
            or slot.streams
            or sum(len(other.live) for other in self._slots) > INLINE_MAX_IN_FLIGHT
        ):
            slot.replay = None
            return False
        if self._answers_may_inline(slot, batch):
            slot.inline_batch = list(slot.replay.values())  # type: ignore[union-attr]
            return True
        slot.replay = None
        if len(batch) != len(slot.live):
            return False
        for message in batch:
            request = message.get("request")
            if (
                message.get("k") != "fetch"
                or message.get("id") not in slot.live
                or (request is not None and request.get("stream") is not None)
            ):
                return False
        slot.inline_batch = batch
        slot.replay = {int(message["id"]): message for message in batch}
        slot.replay_away = slot.host.turns_away
        return True

    @staticmethod
    def _answers_may_inline(slot: _Slot, batch: list[dict[str, Any]]) -> bool:
        """A batch of answers to host calls may turn on the loop too when the requests
        the isolate serves could still start over: each of their turns so far ran on the
        loop, and all they sent out was reads (`_sent`). Stopped at the inline limit, such
        a turn is handled like a first one: the requests start over from their messages
        on a JS thread, and doing their reads again changes nothing outside."""
        replay = slot.replay
        if (
            replay is None
            or slot.host.turns_away != slot.replay_away
            or replay.keys() != slot.live.keys()
        ):
            return False
        return all(message.get("k") == "settle" for message in batch)

    @staticmethod
    def _sent(slot: _Slot, message: dict[str, Any]) -> None:
        """JS sent `message`: unless it is a read, the requests served cannot start over."""
        if slot.replay is not None and not _is_read(message):
            slot.replay = None

    def _charge(self, slot: _Slot, cpu_ms: float) -> None:
        """Share a turn's CPU time among the requests the isolate serves; stop the isolate
        when one of them has used more than its limit."""
        self._turn_peak_ms = max(cpu_ms, self._turn_peak_ms * PEAK_DECAY)
        if not slot.live or cpu_ms <= 0:
            return
        share = cpu_ms / len(slot.live)
        over = False
        for request_id in slot.live:
            slot.live[request_id] += share
            over = over or slot.live[request_id] > self.limits.cpu_ms
        if over and slot.isolate.fault is None:
            slot.isolate.fault = IsolateFault(
                CPU_LIMIT_REASON, f"a request used more than {self.limits.cpu_ms} ms of CPU"
            )

    def _on_respond(self, slot: _Slot, message: dict[str, Any]) -> None:
        if message.get("done") is True:  # the request is over with its answer (see _on_done)
            slot.live.pop(message["id"], None)
        future = slot.pending.pop(message["id"], None)
        if future is None or future.done():
            return
        if "rpc" in message:  # a service binding call's answer (see `call_entrypoint`)
            future.set_result(WireResponse(200, [], orjson.dumps(message["rpc"])))
            return
        for event in ("scheduled", "queue"):  # an event's outcome (see `scheduled`, `queue`)
            if event in message:
                outcome = message[event]
                status = 200 if outcome.get("outcome") == "ok" else 500
                future.set_result(WireResponse(status, [], orjson.dumps(outcome)))
                return
        if "error" in message:
            shape = message["error"]
            stack = self.program.lines.rewrite(shape.get("stack", ""))
            future.set_exception(WorkerError(shape["name"], shape["message"], stack))
            return
        wire = message["response"]
        response = WireResponse(
            status=int(wire["status"]),
            headers=[(str(k), str(v)) for k, v in wire["headers"]],
            body=base64.b64decode(wire["body"]) if wire.get("body") else b"",
            web_socket=str(wire["webSocket"]) if wire.get("webSocket") else None,
        )
        try:
            if "pipe" in wire or "source" in wire:
                chunks, response.length, _ = STREAMS.body_of(wire)
                response.stream = chunks
                if "pipe" in wire:
                    response.stream = self._located(chunks)
                    slot.streams[int(message["id"])] = str(wire["pipe"])
        except HostError as error:
            future.set_exception(WorkerError("TypeError", str(error)))
            return
        future.set_result(response)

    async def _located(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A streamed body whose failure names the Worker's own files and lines."""
        try:
            async for chunk in chunks:
                yield chunk
        except StreamAborted as error:
            raise StreamAborted(str(error), self.program.lines.rewrite(error.stack)) from None
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]

    def _locating_log(self, log_op: OpHandler) -> OpHandler:
        """console output with stack positions turned into the Worker's own files and lines
        (hono, for one, logs the errors it catches with console.error)."""

        def op(message: dict[str, Any]) -> Any:
            text = message.get("text")
            if isinstance(text, str) and "<input>:" in text:
                message = {**message, "text": self.program.lines.rewrite(text)}
            return log_op(message)

        return op

    def _on_js_fault(self, message: dict[str, Any]) -> None:
        shape = message.get("error", {})
        log.error(
            "error in celld runtime handler %s: %s: %s\n%s",
            message.get("kind"),
            shape.get("name"),
            shape.get("message"),
            self.program.lines.rewrite(shape.get("stack", "")),
        )

    def _on_fault(self, slot: _Slot, fault: IsolateFault) -> None:
        detail = self.program.lines.rewrite(fault.detail)
        if slot in self._slots:
            self._slots.remove(slot)
            here, away = self._retired_turns
            self._retired_turns = (here + slot.host.turns_here, away + slot.host.turns_away)
        # Requests the isolate never saw are not its to fail: they go to another one.
        moved = self._take_undelivered(slot)
        if fault.long_turn and slot.inline_batch is not None:
            # A turn run on the event loop was stopped (`_may_inline`): its requests saw
            # nothing leave, and start over on a JS thread; so do the Worker's turns
            # from now on.
            self._long_turns = True
            log.info("a Worker request's turn ran too long for the event loop; moved")
            for message in slot.inline_batch:
                request_id = int(message["id"])
                future = slot.pending.pop(request_id, None)
                slot.live.pop(request_id, None)
                if future is not None and not future.done():
                    moved.append((request_id, future, message))
        else:
            log.error("Worker isolate stopped (%s); replacing it\n%s", fault.reason, detail)
        slot.inline_batch = None
        slot.replay = None
        if moved:
            self._in_background(self._redispatch(moved), "moving requests off a failed isolate")
        for future in slot.pending.values():
            if not future.done():
                future.set_exception(fault_error(fault, detail))
        for pipe in slot.streams.values():
            STREAMS.abort_pipe(pipe, str(fault_error(fault, detail)))
        slot.pending.clear()
        slot.live.clear()
        slot.streams.clear()
        if slot.sockets is not None and self.sockets is not None:
            self.sockets.isolate_gone(slot.sockets)
        if slot.spare:
            # Spares exist for a burst of stuck isolates; one that fails is not replaced.
            self._in_background(slot.host.close(), "closing a failed spare isolate")
            return
        self._in_background(self._replace(slot), "replacing a failed isolate")

    async def _redispatch(
        self, moved: list[tuple[int, asyncio.Future[WireResponse], dict[str, Any]]]
    ) -> None:
        for request_id, future, message in moved:
            if not future.done():
                self._dispatch(await self._pick(), request_id, future, message)

    def _in_background(self, work: Coroutine[Any, Any, None], what: str) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._background.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                log.error("Worker pool: %s failed", what, exc_info=finished.exception())

        task.add_done_callback(done)

    def _check_hung(self, slot: _Slot) -> None:
        """A request is hung when its isolate has nothing left to run and no host work
        pending, waiting for its response or for more of a response body it streams."""
        if not (slot.pending or slot.streams) or slot.host.busy or slot.isolate.runnable:
            return
        if slot.sockets is not None and any(not end.closed_in for end in slot.sockets.ends):
            return  # a WebSocket it accepted may still bring an event, as in workerd
        for request_id, future in slot.pending.items():
            if not future.done():
                future.set_exception(WorkerError("Error", HUNG_MESSAGE))
            slot.live.pop(request_id, None)
            slot.host.post({"k": "drop", "id": request_id})
        slot.pending.clear()
        for request_id, pipe in list(slot.streams.items()):
            if STREAMS.abort_pipe(pipe, f"Error: {HUNG_MESSAGE}"):
                del slot.streams[request_id]
                slot.live.pop(request_id, None)
                slot.host.post({"k": "drop", "id": request_id})

    def abandon(self, request_id: int) -> None:
        """The client went away: stop serving its request (timers, fetches, CPU)."""
        for slot in self._slots:
            future = slot.pending.pop(request_id, None)
            if future is not None:
                future.cancel()
                slot.live.pop(request_id, None)
                slot.host.post({"k": "drop", "id": request_id})
                return

    async def _replace(self, slot: _Slot) -> None:
        try:
            fresh = await self._new_slot()
        except Exception:
            log.exception("could not start a replacement Worker isolate")
            return
        if self._closed:
            await fresh.host.close()
            return
        self._slots.append(fresh)
        self._slot_ready.set()
        await slot.host.close()

    @property
    def busy(self) -> bool:
        """A request is in flight: its answer, its streamed body, its waitUntil work or a
        WebSocket it accepted."""
        return any(
            slot.pending
            or slot.live
            or slot.streams
            or (slot.sockets is not None and any(not end.closed_in for end in slot.sockets.ends))
            for slot in self._slots
        )

    async def drained(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the requests in flight to finish (a replaced
        Worker's, before it is closed); False if some were still going."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.busy:
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def close(self) -> None:
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for slot in self._slots:
            await slot.host.close()
        self._slots = []
        for thread in self._spare_threads:
            thread.shutdown()
        self._spare_threads = []
