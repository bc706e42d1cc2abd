"""One QuickJS context, pinned to a JS thread, driven in turns.

A *turn* delivers a batch of inbound messages, runs pending jobs (promise reactions)
and takes the outbox. CPU is accounted across turns, not per entry into JS, so a
loop of short jobs (`for (;;) await null`) is caught as surely as one long job:

- A turn runs jobs for at most `TURN_SLICE_MS` of wall time, then hands the thread
  back with its remaining jobs still queued (`runnable` is set and the host runs
  another turn after the other isolates on the thread had theirs). No isolate holds
  a thread for longer than one slice, or one job.
- `streak_ms` is the CPU spent since the isolate's job queue was last empty. Work
  that never lets the queue drain is a runaway: past `limits.cpu_ms` the isolate
  faults with "CPU time limit exceeded".
- `cpu_used_ms` counts every turn's thread CPU time. An owner that runs one request
  or one step attempt at a time gives it a budget by setting `cpu_deadline_ms` (a
  point on the `cpu_used_ms` scale, see `start_budget`); a turn that reaches it
  faults the isolate the same way. Owners that share an isolate among several
  requests charge `last_turn_cpu_ms` themselves.
- A single job can only be stopped by QuickJS's interrupt, armed at every turn with
  what is left of the smallest of those budgets.

Turns of an isolate without host callables go through `celld/isolate/native.py`: one
hold of the GIL for the whole turn instead of a hand-off per call into JS. Such an isolate
may run its turns `inline`, on the event-loop thread itself, with no thread hop at all
(in slices shared by every inline isolate: celld/isolate/inline.py).
There a turn yields after `INLINE_SLICE_MS` between jobs, and a single job still running
after `INLINE_LIMIT_MS` of CPU is stopped: the isolate faults with `LONG_TURN_REASON` and its
owner moves the work to a JS thread (a workflow run replays there; see CellRun.on_fault),
so one CPU-bound run never holds the event loop for longer than that.

The memory limit covers the whole context. A limit hit, or any exception escaping
the runtime's own error handling (including a bridge message that cannot be read),
poisons the isolate: `fault` is set and its owner must throw it away (Cloudflare does
the same with an isolate that exceeds its limits).
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import pybase64
import quickjs

from celld.engine.binary import (
    WIRE_PREFIX,
    BinaryValue,
    BlobsText,
    as_base64_text,
    from_wire,
    text_only,
    wire_text,
)
from celld.isolate.bytecode import BYTECODE
from celld.isolate.entropy import entropy_script
from celld.isolate.gate import OutputGate
from celld.isolate.inline import inline_turns
from celld.isolate.layout import direct_pointers, verdict
from celld.isolate.native import NativeBridge, NativeJsError
from celld.isolate.runtime import Script
from celld.isolate.threads import JS_STACK_LIMIT_BYTES, JsThread
from celld.isolate.watchdog import WATCHDOG

log = logging.getLogger("celld.isolate")
T = TypeVar("T")

DEFAULT_CPU_MS = 30_000
DEFAULT_MEMORY_BYTES = 128 * 1024 * 1024
#: Wall time one turn may run jobs before it yields its thread to other isolates.
TURN_SLICE_MS = 20
#: Jobs run between two looks at the clock (reading it costs about as much as a job).
_JOBS_PER_CLOCK_CHECK = 16
CPU_LIMIT_REASON = "CPU time limit exceeded"
#: Inline turns (on the event-loop thread): run jobs for at most this long per turn ...
INLINE_SLICE_MS = 2
#: ... and stop a turn that has used this much CPU (its thread's clock, so time the
#: interpreter gave to other threads is not counted against it).
INLINE_LIMIT_MS = 10
#: The fault of an inline turn stopped at INLINE_LIMIT_MS: not the work's failure, only a
#: sign that it belongs on a JS thread.
LONG_TURN_REASON = "a turn ran too long for the event loop"
#: The fault of an isolate told a result whose write then failed (celld/isolate/gate.py):
#: its memory may hold what was lost. Not the work's failure either: it runs again.
LOST_WRITE_REASON = "a result this isolate was told of was never committed"
#: A run was stopped in a shared isolate while host work JS cannot attribute was in flight
#: (celld/isolate/host.py, `remove_tenant`): that work may be the stopped run's, and its
#: answer would wake it. Not the others' failure: they start over elsewhere.
CO_TENANT_STOPPED_REASON = "a run was stopped with work of no run in flight"
#: The runtime's note (js/host.js) that user code replaced a built-in it watches.
INTRINSICS_CHANGED = "intrinsics.changed"


@dataclass(frozen=True)
class Limits:
    """Resource limits of one isolate."""

    cpu_ms: int = DEFAULT_CPU_MS  # CPU a request, an attempt or a busy streak may use
    memory_bytes: int = DEFAULT_MEMORY_BYTES


class IsolateFault(Exception):
    """The isolate hit a limit or failed in a way JS could not catch; it is unusable."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        #: the run that caused it, when known (a run past its CPU budget): the other runs
        #: of the isolate only replay elsewhere (celld/isolate/tenant.py)
        self.culprit: object = None
        #: how many runs the isolate served when it faulted
        self.tenants = 1

    @property
    def long_turn(self) -> bool:
        """An inline turn stopped for taking too long: the work may run again elsewhere."""
        return self.reason == LONG_TURN_REASON

    @property
    def lost_write(self) -> bool:
        """Condemned by its output gate, or given up for a stopped co-tenant: the work
        runs again from what is durable."""
        return self.reason in (LOST_WRITE_REASON, CO_TENANT_STOPPED_REASON)


class ScriptError(Exception):
    """A script failed while loading (syntax error, exception at top level)."""

    def __init__(self, script: str, detail: str) -> None:
        super().__init__(f"{script}: {detail}")
        self.script = script
        self.detail = detail


def classify_fault(error: BaseException) -> IsolateFault:
    """Name the limit a QuickJS exception stands for, so logs and errors say which.

    A bare `null` is QuickJS running out of memory so completely that it cannot allocate
    the error object: what was filling memory has been freed by the time anyone looks,
    so the text is all there is to go by. (User code can throw null out of a turn too,
    from a queueMicrotask or FinalizationRegistry callback; that is named memory as well.)
    """
    text = str(error)
    if isinstance(error, quickjs.StackOverflow) or "stack overflow" in text:
        return IsolateFault("stack overflow", text)
    if text.strip() in ("null", ""):
        return IsolateFault(
            "memory limit exceeded",
            "QuickJS threw null: it could not allocate even the error object",
        )
    if "Maximum call stack size exceeded" in text:
        return IsolateFault("stack overflow", text)
    if "interrupted" in text:
        return IsolateFault(CPU_LIMIT_REASON, text)
    if "out of memory" in text:
        return IsolateFault("memory limit exceeded", text)
    return IsolateFault("isolate failure", text)


class Isolate:
    """A QuickJS context on one thread; every method that touches it runs there."""

    def __init__(
        self,
        thread: JsThread,
        limits: Limits | None = None,
        *,
        callables: Mapping[str, Callable[..., Any]] | None = None,
        turn_end: Callable[[], None] | None = None,
    ) -> None:
        self.thread = thread
        self.limits = limits or Limits()
        #: Host functions JS calls in place (Durable Object storage). QuickJS refuses them
        #: while a time limit is armed, so an isolate that has any runs without one; the
        #: CPU watchdog (celld/isolate/watchdog.py) stops its turns at the limit instead;
        #: where it cannot work here, loading raises watchdog.NoCpuLimit.
        self.callables = dict(callables or {})
        self._runtime: int | None = None  # the watchdog's handle, for isolates with callables
        #: Run on the isolate's thread after each turn, before its outbox is returned
        #: (an object commits its writes there: the output gate). Raising faults it.
        self.turn_end = turn_end
        self.fault: IsolateFault | None = None
        #: every message JS sends passes here (celld/isolate/gate.py); it stays with the
        #: isolate whichever run or request it serves next
        self.gate = OutputGate(self._lost_write)
        self._context: quickjs.Context | None = None
        self._deliver: Any = None
        self._take: Any = None
        #: Direct calls into the context (None: through the binding; see native.py).
        self._native: NativeBridge | None = None
        #: Binary data of values crosses as ArrayBuffers beside the messages (direct calls
        #: whose ArrayBuffer calls passed their check, layout.py); else as base64 in them.
        self._binary = False
        #: Run turns on the calling (event-loop) thread instead of `thread`; only takes
        #: effect for isolates with the direct path (`native`).
        self.inline = False
        thread.load += 1
        self._closed = False
        #: calls into the context queued or running on `thread` (see `may_turn_here`)
        self._thread_calls = 0
        #: Thread CPU time (ms) spent in this isolate's turns, ever.
        self.cpu_used_ms = 0.0
        #: CPU time of the last turn (ms), for owners that charge requests themselves.
        self.last_turn_cpu_ms = 0.0
        #: CPU time since the job queue was last empty (ms).
        self.streak_ms = 0.0
        #: When `cpu_used_ms` reaches this, the isolate faults (None: no budget).
        self.cpu_deadline_ms: float | None = None
        #: The last turn stopped at the end of its slice with jobs still queued.
        self.runnable = False
        #: `time.monotonic()` when the current turn was handed to the thread, else None.
        self.turn_queued_at: float | None = None
        #: Byte areas JS sent that no message named yet (attachment id -> (area, the take
        #: it came with)): a value serialized in one turn may be sent in the next.
        self._areas: dict[int, tuple[bytes, int]] = {}
        self._takes = 0
        #: User code replaced a built-in the runtime watches (JSON.parse,
        #: Array.prototype.push, ...): the isolate is not handed to another run.
        self.tainted = False

    # -- lifecycle -------------------------------------------------------------------

    async def load(self, scripts: Sequence[Script]) -> None:
        """Create the context and evaluate `scripts` in order (runtime first, then user code)."""
        await self.thread.run(lambda: self._load_sync(scripts))

    def _load_sync(self, scripts: Sequence[Script]) -> None:
        context = quickjs.Context()
        context.set_max_stack_size(JS_STACK_LIMIT_BYTES)
        context.set_memory_limit(self.limits.memory_bytes)
        for name, function in self.callables.items():
            context.add_callable(name, function)
        context.set_time_limit(-1 if self.callables else self.limits.cpu_ms / 1000)
        if self.callables:
            self._runtime = WATCHDOG.runtime_of(context)
        # Verified once per context (layout.py); None: the binding's own methods only.
        pointers = None if self.callables else direct_pointers(context)
        # A fresh random key for this isolate alone, before any user code can draw on it.
        context.eval(entropy_script().source)
        self._arm(self.limits.cpu_ms)
        try:
            for script in scripts:
                try:
                    # (Not with host callables: JS calling Python needs the binding's own
                    # entry into JS, which knows how it let the GIL go.)
                    if pointers is None or not BYTECODE.evaluate(pointers[1], script.source):
                        context.eval(script.source)
                except (quickjs.JSException, NativeJsError) as error:
                    if self._disarm():
                        raise IsolateFault(CPU_LIMIT_REASON, "loading took too long") from None
                    raise ScriptError(script.name, str(error)) from None
        finally:
            self._disarm()
        self._context = context
        self._deliver = context.get("__celld_deliver")
        self._take = context.get("__celld_take")
        if not self.callables:
            # From here on the runtime's interrupt handler is the bridge's, which enforces
            # the same CPU limits per turn (and, inline, the wall-time limit).
            context.set_time_limit(-1)
            self._binary = pointers is not None and verdict().binary_values
            self._native = NativeBridge.attach(
                pointers,
                "__celld_deliver",
                "__celld_take",
                "__celld_take_attachment" if self._binary else None,
            )
            if self._native is None:
                self._binary = False
                context.set_time_limit(self.limits.cpu_ms / 1000)
        # Binary data crosses as ArrayBuffers only through verified direct calls (js/host.js;
        # a bare script without celld's runtime has no bridge to tell).
        if self._deliver is not None:
            context.eval(f"__celld_binary_bridge({'true' if self._binary else 'false'})")

    def _lost_write(self, error: BaseException) -> None:
        if self.fault is None:
            self.fault = IsolateFault(LOST_WRITE_REASON, str(error))

    @property
    def native(self) -> bool:
        """Turns go straight to QuickJS (one hold of the GIL each) and may run inline."""
        return self._native is not None

    async def close(self) -> None:
        """Drop the context on its own thread (freeing it elsewhere can crash QuickJS)."""
        if self._closed:
            return
        self._closed = True
        self.thread.load -= 1
        await self.thread.run(self._close_sync)

    def _close_sync(self) -> None:
        if self._native is not None:
            self._native.enter(JS_STACK_LIMIT_BYTES)
            self._native.close()
            self._native = None
        self._deliver = None
        self._take = None
        self._context = None

    # -- CPU budget ------------------------------------------------------------------

    def start_budget(self, cpu_ms: float | None = None) -> None:
        """Give the work starting now (one request, one step attempt) `cpu_ms` of CPU,
        counted over all its turns and jobs (default: `limits.cpu_ms`). A turn that
        goes past it faults the isolate with "CPU time limit exceeded"."""
        budget = self.limits.cpu_ms if cpu_ms is None else cpu_ms
        self.cpu_deadline_ms = self.cpu_used_ms + budget

    def end_budget(self) -> float:
        """Drop the budget; returns what was left of it (ms, 0 if there was none)."""
        deadline, self.cpu_deadline_ms = self.cpu_deadline_ms, None
        return 0.0 if deadline is None else max(0.0, deadline - self.cpu_used_ms)

    def _allowance_ms(self) -> float:
        """CPU the next turn may use before some budget is exhausted."""
        allowed = self.limits.cpu_ms - self.streak_ms
        if self.cpu_deadline_ms is not None:
            allowed = min(allowed, self.cpu_deadline_ms - self.cpu_used_ms)
        return allowed

    # -- turns -----------------------------------------------------------------------

    @property
    def turns_inline(self) -> bool:
        """Its turns run on the event-loop thread (see `turn_now`)."""
        return self.inline and self._native is not None

    @property
    def may_turn_here(self) -> bool:
        """A turn may run on the calling (event-loop) thread now, though the isolate's
        turns run on its JS thread: it has the direct path and nothing of it is in
        flight there (a call on its thread may let the GIL go inside the runtime, which
        a turn here would then enter at the same time). Its owner decides when this is
        worth it (celld/isolate/host.py, `prompt_inline`)."""
        return self._native is not None and not self.callables and self._thread_calls == 0

    async def turn(self, inbox: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deliver `inbox`, run pending jobs for up to one slice, return the outbox.

        Raises IsolateFault (and sets `fault`) on a limit or a broken bridge."""
        if self.fault is not None:
            raise self.fault
        payload = _payload(inbox, self._binary)
        self.turn_queued_at = time.monotonic()
        try:
            if self.inline and self._native is not None:
                outbox = await inline_turns().run(lambda: self._turn_sync(payload, inline=True))
            else:
                self._thread_calls += 1
                try:
                    outbox = await self.thread.run_batched(lambda: self._turn_sync(payload))
                finally:
                    self._thread_calls -= 1
        except _TURN_FAILURES as error:
            raise self._faulted(error) from None
        finally:
            self.turn_queued_at = None
        return self._messages(outbox)

    def turn_soon(
        self,
        inbox: Sequence[dict[str, Any]],
        done: Callable[[list[dict[str, Any]] | None, BaseException | None], None],
    ) -> None:
        """`turn` on the isolate's JS thread, started at once, with `done(outbox, error)`
        called on the event loop when it ends (`error` is the fault, as `turn` raises it):
        a turn a client waits on crosses the loop once each way instead of four times."""
        loop = asyncio.get_running_loop()
        if self.fault is not None:
            loop.call_soon(done, None, self.fault)
            return
        payload = _payload(inbox, self._binary)
        self.turn_queued_at = time.monotonic()

        def finish(outbox: bytes | str | None, error: BaseException | None) -> None:
            self.turn_queued_at = None
            self._thread_calls -= 1
            messages = None
            if error is None:
                try:
                    messages = self._messages(outbox)  # type: ignore[arg-type]
                except IsolateFault as fault:
                    error = fault
            elif isinstance(error, _TURN_FAILURES):
                error = self._faulted(error)
            done(messages, error)

        self._thread_calls += 1
        self.thread.run_then(lambda: self._turn_sync(payload), finish, loop)

    def turn_now(self, inbox: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """`turn` for an isolate that `turns_inline`, run right here: the caller is an
        inline slice (celld/isolate/inline.py), so no future and no task per turn."""
        if self.fault is not None:
            raise self.fault
        try:
            outbox = self._turn_sync(_payload(inbox, self._binary), inline=True)
        except _TURN_FAILURES as error:
            raise self._faulted(error) from None
        return self._messages(outbox)

    def _with_areas(
        self, messages: list[dict[str, Any]], areas: dict[int, bytes]
    ) -> list[dict[str, Any]]:
        """Messages with each `{"$":"Blobs"}` text that names a byte area JS sent made a
        BinaryValue (celld/engine/binary.py). An area no message named yet is kept for the
        next take, then dropped (the text that named it was never sent)."""
        if messages and messages[-1].get("op") == _AREAS_OP:
            messages = messages[:-1]
        self._takes += 1
        for at, area in areas.items():
            self._areas[at] = (area, self._takes)
        pending = {at: area for at, (area, _) in self._areas.items()}
        messages = [_bind_areas(message, pending) for message in messages]
        self._areas = {
            at: kept for at, kept in self._areas.items() if at in pending and kept[1] == self._takes
        }
        return messages

    def _faulted(self, error: BaseException) -> IsolateFault:
        """The fault a failed turn leaves on the isolate."""
        self.fault = error if isinstance(error, IsolateFault) else classify_fault(error)
        return self.fault

    def _messages(self, outbox: bytes | str) -> list[dict[str, Any]]:
        """A turn's outbox as messages (a broken one faults the isolate)."""
        try:
            messages = _loads(outbox)
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise TypeError("the outbox is not a list of messages")
        except (ValueError, TypeError) as error:
            # Only a runtime whose own built-ins were broken writes an unreadable outbox:
            # the isolate cannot talk to the host any more.
            self.fault = IsolateFault("the isolate's message bridge is broken", str(error))
            raise self.fault from None
        areas = getattr(outbox, "areas", None)
        if areas is not None or self._areas:
            messages = self._with_areas(messages, areas or {})
        for message in messages:
            if message.get("op") == INTRINSICS_CHANGED:
                self.tainted = True
                log.info(
                    "user code replaced the built-in %s; this isolate will not be reused",
                    message.get("name"),
                )
                messages = [m for m in messages if m.get("op") != INTRINSICS_CHANGED]
                break
        return messages

    def _turn_sync(self, payload: bytes, inline: bool = False) -> bytes | str:
        context = self._context
        if context is None:
            raise IsolateFault("isolate closed", "")
        allowed = self._allowance_ms()
        if allowed <= 0:
            raise IsolateFault(CPU_LIMIT_REASON, "the CPU budget was already used up")
        if self._native is not None:
            return self._native_turn(self._native, payload, allowed, inline)
        # Arms QuickJS's interrupt for each entry into JS below (delivery, each job).
        context.set_time_limit(-1 if self.callables else allowed / 1000)
        cpu_start = time.thread_time()
        slice_end = time.perf_counter() + TURN_SLICE_MS / 1000
        drained = False
        self._arm(allowed)
        try:
            if payload != b"[]":
                self._deliver(payload.decode())
            while not drained:
                for _ in range(_JOBS_PER_CLOCK_CHECK):
                    if not context.execute_pending_job():
                        drained = True
                        break
                if time.perf_counter() >= slice_end:
                    break
            outbox = self._take()
            if self.callables:
                # No QuickJS time limit here (see `callables`): a turn past the limit is
                # stopped as it ends, before its writes commit or its messages leave.
                used = (time.thread_time() - cpu_start) * 1000
                if used > self.limits.cpu_ms:
                    raise IsolateFault(CPU_LIMIT_REASON, f"one turn used {used:.0f} ms")
            if self.turn_end is not None:
                try:
                    self.turn_end()
                except Exception as error:  # noqa: BLE001 - the owner's commit failed
                    raise IsolateFault("its storage could not commit", str(error)) from None
        finally:
            self._disarm()
            self._account(cpu_start, drained)
        if not isinstance(outbox, str):
            raise IsolateFault("the isolate's message bridge is broken", "the outbox is not text")
        if self._allowance_ms() <= 0:
            raise IsolateFault(CPU_LIMIT_REASON, "its jobs kept running past the CPU limit")
        return outbox

    def _native_turn(
        self, bridge: NativeBridge, payload: bytes, allowed: float, inline: bool
    ) -> bytes:
        """The turn through direct calls: the same rules, one hold of the GIL."""
        cpu_start = time.thread_time()
        started = time.perf_counter()
        slice_end = started + (INLINE_SLICE_MS if inline else TURN_SLICE_MS) / 1000
        drained = False
        bridge.enter(JS_STACK_LIMIT_BYTES)
        bridge.arm(
            cpu_start + allowed / 1000, cpu_start + INLINE_LIMIT_MS / 1000 if inline else None
        )
        try:
            if payload != b"[]":
                bridge.deliver(payload, getattr(payload, "areas", None))
            while not drained:
                drained = bridge.run_jobs(_JOBS_PER_CLOCK_CHECK)
                if time.perf_counter() >= slice_end:
                    break
            outbox = bridge.take()
            mark = outbox.rfind(_AREAS_MARK)
            if mark >= 0:
                ids = orjson.loads(
                    outbox[mark + len(_AREAS_MARK) - 1 : outbox.index(b"]", mark) + 1]
                )
                outbox = _Outbox(outbox)
                outbox.areas = dict(zip(ids, bridge.take_attachments(len(ids)), strict=True))
        except NativeJsError as error:
            if bridge.deadlines.fired == "long":
                raise IsolateFault(
                    LONG_TURN_REASON, f"stopped after {INLINE_LIMIT_MS} ms"
                ) from None
            raise classify_fault(error) from None
        finally:
            bridge.disarm()
            self._account(cpu_start, drained)
        if self._allowance_ms() <= 0:
            raise IsolateFault(CPU_LIMIT_REASON, "its jobs kept running past the CPU limit")
        return outbox

    def _account(self, cpu_start: float, drained: bool) -> None:
        """Charge the turn that began at thread CPU time `cpu_start` to the budgets."""
        spent = (time.thread_time() - cpu_start) * 1000
        self.last_turn_cpu_ms = spent
        self.cpu_used_ms += spent
        self.streak_ms = 0.0 if drained else self.streak_ms + spent
        self.runnable = not drained

    def _arm(self, allowed_ms: float) -> None:
        if self._runtime is not None:
            WATCHDOG.arm(self._runtime, allowed_ms / 1000)

    def _disarm(self) -> bool:
        """End the watchdog's watch of this turn; True if it stopped the turn."""
        return self._runtime is not None and WATCHDOG.disarm(self._runtime)

    async def _where_it_turns(self, call: Callable[[], T]) -> T:
        """Run `call` where the isolate's turns run: inline on the event-loop thread (a
        call on its JS thread would let the GIL go and let an inline turn into the same
        runtime meanwhile), or on its JS thread, after the turns queued there."""
        if self.inline and self._native is not None:
            return call()
        self._thread_calls += 1
        try:
            return await self.thread.run(call)
        finally:
            self._thread_calls -= 1

    def _enter(self) -> quickjs.Context:
        """The context, ready for a call from the current thread (see native.py: stack)."""
        assert self._context is not None
        if self._native is not None:
            self._native.enter(JS_STACK_LIMIT_BYTES)
        return self._context

    def eval_sync(self, source: str) -> Any:
        """Evaluate `source` on the isolate's thread (call only from that thread)."""
        return self._enter().eval(source)

    async def eval(self, source: str) -> Any:
        """Evaluate a snippet on the isolate's thread; primitives come back as Python values."""

        def run() -> Any:
            return self._enter().eval(source)

        return await self._where_it_turns(run)

    async def intrinsics_changed(self) -> list[str]:
        """The built-ins (JSON, Array.prototype, ...) user code changed in this isolate since
        the runtime loaded; an isolate with any is not handed to another run."""
        if self._closed or self._context is None or self.fault is not None:
            return []

        def read() -> str:
            return str(self._enter().eval("__celld_intrinsics_changed()"))

        try:
            return list(orjson.loads(await self._where_it_turns(read)))
        except (quickjs.JSException, quickjs.StackOverflow, orjson.JSONDecodeError) as error:
            self.fault = IsolateFault("the isolate's runtime is broken", str(error))
            return []

    async def audit(self) -> bool:
        """Before reuse: fault the isolate if user code changed built-ins (the next run
        would inherit the changes) or it no longer answers. True when it is fit for reuse."""
        changed = await self.intrinsics_changed()
        if changed and self.fault is None:
            self.fault = IsolateFault("built-ins were modified", ", ".join(changed))
            log.info("not reusing an isolate whose built-ins were modified: %s", ", ".join(changed))
        return self.fault is None

    async def memory(self) -> dict[str, int]:
        def read() -> dict[str, int]:
            return dict(self._enter().memory())

        return await self._where_it_turns(read)


#: What a turn may fail with: a limit, or JS failing outside any job's own handling.
_TURN_FAILURES = (IsolateFault, quickjs.JSException, quickjs.StackOverflow, NativeJsError)


class Piece:
    """A piece of a body (bytes) for JS, as an answer's value (`{"k": "settle", "v": Piece}`):
    it travels after the turn's JSON as base64 text, which JS takes as it is instead of
    parsing it as a JSON string (js/host.js, `deliver`)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


#: The last message of an outbox that sends byte areas (js/host.js, `take`).
_AREAS_OP = "$attachments"
_AREAS_MARK = b'{"op":"$attachments","ids":['


class _Outbox(bytes):
    """A turn's outbox text and the byte areas JS sent with it (attachment id -> bytes)."""

    areas: dict[int, bytes]


class _Payload(bytes):
    """A turn's inbox text and the byte areas it attaches, in the order of its `$attach`."""

    areas: list[bytes]


def _bind_areas(node: Any, areas: dict[int, bytes]) -> Any:
    """`node` (a message, or a part of one) with its `{"$":"Blobs"}` texts made values."""
    if isinstance(node, str):
        if node.startswith(WIRE_PREFIX):
            value = from_wire(node, areas)
            if value is not None:
                return value
        return node
    if isinstance(node, dict):
        return {key: _bind_areas(item, areas) for key, item in node.items()}
    if isinstance(node, list):
        return [_bind_areas(item, areas) for item in node]
    return node


def _payload(inbox: Sequence[dict[str, Any]], binary: bool = False) -> bytes:
    """A turn's inbox as the text `deliver` takes: the messages' JSON, then a NUL and the
    base64 of each piece (JSON text never holds a raw NUL). With `binary`, the byte areas
    of binary values go beside it as ArrayBuffers (a `_Payload`); without, binary values
    go in their base64 form."""
    pieces: list[bytes] = []
    for index, message in enumerate(inbox):
        value = message.get("v")
        if type(value) is Piece:
            if not pieces:
                inbox = list(inbox)
            rest = {k: v for k, v in message.items() if k != "v"}
            inbox[index] = {**rest, "piece": len(pieces)}  # type: ignore[index]
            pieces.append(pybase64.b64encode(value.data))
    ids: list[int] = []
    areas: list[bytes] = []
    text = _dumps(inbox, _Values(binary, ids, areas))
    if ids:
        head = b'[{"k":"$attach","ids":' + orjson.dumps(ids) + b"}"
        text = _Payload(head + (b"," if len(text) > 2 else b"") + text[1:])
        text.areas = areas
    if not pieces:
        return text
    joined = _Payload(b"\0".join([text, *pieces]))
    joined.areas = areas
    return joined


class _Values:
    """orjson's `default` for an inbox: RawJson, binary values and the subclasses of str,
    int, dict and list that orjson is told to pass here (so that binary values do)."""

    __slots__ = ("binary", "ids", "areas")

    def __init__(self, binary: bool, ids: list[int], areas: list[bytes]) -> None:
        self.binary = binary
        self.ids = ids
        self.areas = areas

    def __call__(self, value: Any) -> Any:
        if type(value) is BinaryValue:
            if not self.binary:
                return orjson.Fragment(as_base64_text(value))
            text, at = wire_text(value)
            self.ids.append(at)
            self.areas.append(value.area)
            return orjson.Fragment(text)
        if isinstance(value, RawJson):
            text = value.text
            if type(text) is BlobsText:
                if not self.binary:
                    return orjson.Fragment(text_only(text))
                for at, carried in text.values.items():
                    self.ids.append(at)
                    self.areas.append(carried.area)
                return orjson.Fragment(str(text))  # (orjson takes exactly str or bytes)
            return orjson.Fragment(text)
        if isinstance(value, enum.Enum):
            return value.value
        for base in (str, int, float, dict, list):
            if isinstance(value, base):
                return base(value)
        raise TypeError(f"{type(value).__name__} cannot be sent to JS")


def _dumps(value: Any, default: Any = None) -> bytes:
    try:
        return orjson.dumps(
            value,
            default=default or _Values(False, [], []),
            option=orjson.OPT_PASSTHROUGH_SUBCLASS,
        )
    except TypeError:
        # orjson refuses strings holding lone surrogates (JS strings may); the stdlib writes
        # them as \uXXXX escapes, which JSON.parse turns back into the same JS string.
        return json.dumps(_plain(value), default=_raw_parsed).encode()


def _plain(value: Any) -> Any:
    """`value` with binary values in their base64 form (for the stdlib's encoder, which
    writes a str subclass as its text and would drop a value's bytes)."""
    if type(value) is BinaryValue:
        return RawJson(as_base64_text(value))
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _loads(text: bytes | str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # JSON.stringify escapes a lone surrogate as \udXXX, which orjson refuses.
        return json.loads(text)


class RawJson:
    """JSON text to be put into a message as it is (a run's journal): JS parses it with
    the message, once, instead of a string that it parses again."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _raw_parsed(value: Any) -> Any:
    if isinstance(value, RawJson):
        return json.loads(text_only(value.text))
    raise TypeError(f"{type(value).__name__} cannot be sent to JS")
