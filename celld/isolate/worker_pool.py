"""A pool of isolates that serve a Worker's fetch handler.

Requests go to the isolate with the fewest requests in flight; an isolate serves
many requests at once (they interleave at awaits, as in workerd). When an isolate
faults (CPU or memory limit, stack overflow), every request it was serving fails
with a 500 and a fresh isolate takes its place; other isolates are untouched.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from celld.isolate.host import IsolateHost, OpHandler
from celld.isolate.isolate import Isolate, IsolateFault, Limits
from celld.isolate.program import Program
from celld.isolate.threads import JsThreadPool

log = logging.getLogger("celld.worker")

HUNG_MESSAGE = (
    "The Workers runtime canceled this request because it detected that your "
    "Worker's code had hung and would never generate a response."
)


@dataclass
class WireResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


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
    pending: dict[int, asyncio.Future[WireResponse]] = field(default_factory=dict)


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
    ) -> None:
        self.program = program
        self.threads = threads
        self.ops = dict(ops)
        self.env_message = env_message
        self.size = size or len(threads.threads)
        self.limits = limits or Limits()
        self._slots: list[_Slot] = []
        self._slot_ready = asyncio.Event()
        self._next_id = 0

    async def start(self) -> None:
        self._slots = [await self._new_slot() for _ in range(self.size)]
        self._slot_ready.set()

    async def _new_slot(self) -> _Slot:
        isolate = Isolate(self.threads.pick(), self.limits)
        await isolate.load([self.program.script])
        slot: _Slot
        ops = dict(self.ops)
        ops["respond"] = lambda message: self._on_respond(slot, message)
        if "log" in ops:
            ops["log"] = self._locating_log(ops["log"])
        ops["fault"] = lambda message: self._on_js_fault(message)
        host = IsolateHost(isolate, ops, on_fault=lambda fault: self._on_fault(slot, fault))
        slot = _Slot(isolate, host)
        host.post({"k": "env", **self.env_message})
        host.idle_callback = lambda: self._check_hung(slot)
        return slot

    async def handle(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> WireResponse:
        while not self._slots:  # every isolate faulted at once: wait for a replacement
            self._slot_ready.clear()
            await self._slot_ready.wait()
        slot = min(self._slots, key=lambda s: len(s.pending))
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[WireResponse] = asyncio.get_running_loop().create_future()
        slot.pending[request_id] = future
        slot.host.post(
            {
                "k": "fetch",
                "id": request_id,
                "request": {
                    "method": method,
                    "url": url,
                    "headers": headers,
                    "body": base64.b64encode(body).decode() if body else None,
                },
            }
        )
        return await future

    # -- answers from JS -------------------------------------------------------------

    def _on_respond(self, slot: _Slot, message: dict[str, Any]) -> None:
        future = slot.pending.pop(message["id"], None)
        if future is None or future.done():
            return
        if "error" in message:
            shape = message["error"]
            stack = self.program.lines.rewrite(shape.get("stack", ""))
            future.set_exception(WorkerError(shape["name"], shape["message"], stack))
            return
        wire = message["response"]
        future.set_result(
            WireResponse(
                status=int(wire["status"]),
                headers=[(str(k), str(v)) for k, v in wire["headers"]],
                body=base64.b64decode(wire["body"]) if wire.get("body") else b"",
            )
        )

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
        log.error("Worker isolate stopped (%s); replacing it\n%s", fault.reason, detail)
        if slot in self._slots:
            self._slots.remove(slot)
        for future in slot.pending.values():
            if not future.done():
                future.set_exception(
                    WorkerError("Error", f"Worker exceeded a limit: {fault.reason}", detail)
                )
        slot.pending.clear()
        asyncio.get_running_loop().create_task(self._replace(slot))

    def _check_hung(self, slot: _Slot) -> None:
        """A request is hung when its isolate has nothing left to run and no host work pending."""
        if slot.pending and not slot.host.busy:
            for future in slot.pending.values():
                if not future.done():
                    future.set_exception(WorkerError("Error", HUNG_MESSAGE))
            slot.pending.clear()

    async def _replace(self, slot: _Slot) -> None:
        try:
            fresh = await self._new_slot()
        except Exception:
            log.exception("could not start a replacement Worker isolate")
            return
        self._slots.append(fresh)
        self._slot_ready.set()
        await slot.host.close()

    async def close(self) -> None:
        for slot in self._slots:
            await slot.host.close()
        self._slots = []
