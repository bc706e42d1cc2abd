"""A real isolate (the whole celld runtime) driven synchronously, for generated-input tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson

from celld.isolate.isolate import Isolate, Limits
from celld.isolate.runtime import runtime_scripts
from celld.isolate.threads import JsThread


class SyncIsolate:
    """One isolate and its own event loop; `run(source)` evaluates a snippet whose value
    is JSON text and returns it decoded."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = JsThread("fuzz-js")
        self.isolate = Isolate(self.thread, Limits(cpu_ms=5_000, memory_bytes=64 * 1024 * 1024))
        self.loop.run_until_complete(self.isolate.load(runtime_scripts()))

    def run(self, source: str) -> Any:
        text = self.loop.run_until_complete(self.isolate.eval(source))
        return orjson.loads(text)

    def close(self) -> None:
        self.loop.run_until_complete(self.isolate.close())
        self.loop.close()
        self.thread.shutdown()


def sync_isolate() -> Iterator[SyncIsolate]:
    isolate = SyncIsolate()
    try:
        yield isolate
    finally:
        isolate.close()
