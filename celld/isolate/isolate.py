"""One QuickJS context, pinned to a JS thread, driven in turns.

A *turn* delivers a batch of inbound messages, runs every pending job (promise
reactions) and takes the outbox. The CPU limit is armed for each entry into JS, so
a runaway job is interrupted; the memory limit covers the whole context. A limit
hit, or any exception escaping the runtime's own error handling, poisons the
isolate: its owner must throw it away (Cloudflare does the same with an isolate
that exceeds its limits).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import quickjs

from celld.isolate.entropy import entropy_script
from celld.isolate.runtime import Script
from celld.isolate.threads import JS_STACK_LIMIT_BYTES, JsThread

DEFAULT_CPU_MS = 30_000
DEFAULT_MEMORY_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Resource limits of one isolate."""

    cpu_ms: int = DEFAULT_CPU_MS  # per entry into JS (one delivery or one job)
    memory_bytes: int = DEFAULT_MEMORY_BYTES


class IsolateFault(Exception):
    """The isolate hit a limit or failed in a way JS could not catch; it is unusable."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ScriptError(Exception):
    """A script failed while loading (syntax error, exception at top level)."""

    def __init__(self, script: str, detail: str) -> None:
        super().__init__(f"{script}: {detail}")
        self.script = script
        self.detail = detail


def classify_fault(error: BaseException) -> IsolateFault:
    """Name the limit a QuickJS exception stands for, so logs and errors say which."""
    text = str(error)
    if isinstance(error, quickjs.StackOverflow) or "stack overflow" in text:
        return IsolateFault("stack overflow", text)
    if "interrupted" in text:
        return IsolateFault("CPU time limit exceeded", text)
    if "out of memory" in text:
        return IsolateFault("memory limit exceeded", text)
    return IsolateFault("isolate failure", text)


class Isolate:
    """A QuickJS context on one thread; every method that touches it runs there."""

    def __init__(self, thread: JsThread, limits: Limits | None = None) -> None:
        self.thread = thread
        self.limits = limits or Limits()
        self.fault: IsolateFault | None = None
        self._context: quickjs.Context | None = None
        self._deliver: Any = None
        self._take: Any = None
        thread.load += 1
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------

    async def load(self, scripts: Sequence[Script]) -> None:
        """Create the context and evaluate `scripts` in order (runtime first, then user code)."""
        await self.thread.run(lambda: self._load_sync(scripts))

    def _load_sync(self, scripts: Sequence[Script]) -> None:
        context = quickjs.Context()
        context.set_max_stack_size(JS_STACK_LIMIT_BYTES)
        context.set_memory_limit(self.limits.memory_bytes)
        context.set_time_limit(self.limits.cpu_ms / 1000)
        # A fresh random key for this isolate alone, before any user code can draw on it.
        context.eval(entropy_script().source)
        for script in scripts:
            try:
                context.eval(script.source)
            except quickjs.JSException as error:
                raise ScriptError(script.name, str(error)) from None
        self._context = context
        self._deliver = context.get("__celld_deliver")
        self._take = context.get("__celld_take")

    async def close(self) -> None:
        """Drop the context on its own thread (freeing it elsewhere can crash QuickJS)."""
        if self._closed:
            return
        self._closed = True
        self.thread.load -= 1
        await self.thread.run(self._close_sync)

    def _close_sync(self) -> None:
        self._deliver = None
        self._take = None
        self._context = None

    # -- turns -----------------------------------------------------------------------

    async def turn(self, inbox: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deliver `inbox`, run all pending jobs, return the outbox. Raises IsolateFault."""
        if self.fault is not None:
            raise self.fault
        payload = orjson.dumps(inbox).decode()
        try:
            outbox = await self.thread.run_batched(lambda: self._turn_sync(payload))
        except (quickjs.JSException, quickjs.StackOverflow) as error:
            self.fault = classify_fault(error)
            raise self.fault from None
        return orjson.loads(outbox)

    def _turn_sync(self, payload: str) -> str:
        context = self._context
        if context is None:
            raise IsolateFault("isolate closed", "")
        if payload != "[]":
            self._deliver(payload)
        while context.execute_pending_job():
            pass
        return self._take()

    def eval_sync(self, source: str) -> Any:
        """Evaluate `source` on the isolate's thread (call only from that thread)."""
        assert self._context is not None
        return self._context.eval(source)

    async def eval(self, source: str) -> Any:
        """Evaluate a snippet on the isolate's thread; primitives come back as Python values."""

        def run() -> Any:
            assert self._context is not None
            return self._context.eval(source)

        return await self.thread.run(run)

    async def memory(self) -> dict[str, int]:
        def read() -> dict[str, int]:
            assert self._context is not None
            return dict(self._context.memory())

        return await self.thread.run(read)
