"""Run snippets of JS in a real isolate with the full celld runtime loaded.

The snippet is the body of an async function; what it returns is sent back with
JSON.stringify and decoded here. Used by the web-platform tests.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from celld.isolate.host import IsolateHost
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.ops import isolate_ops
from celld.isolate.runtime import Script, runtime_scripts
from celld.isolate.threads import JsThreadPool

_POOL: JsThreadPool | None = None


def pool() -> JsThreadPool:
    global _POOL
    if _POOL is None:
        _POOL = JsThreadPool(2, name="test-js")
    return _POOL


class JsError(Exception):
    """The snippet threw; carries the JS error's name and message."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


async def run_js_async(
    body: str,
    *,
    limits: Limits | None = None,
    timeout: float = 20,
    extra: tuple[Script, ...] = (),
    ops: dict[str, Any] | None = None,
    env: dict[str, Any] | None = None,
    inline: bool = False,
    callables: dict[str, Any] | None = None,
) -> Any:
    """Run `body`; `extra` scripts load after the runtime, `ops` adds host operations and
    `env` is posted as the env message first (the snippet reads it as `env`). `inline`
    runs the turns on the calling event-loop thread; `callables` are host functions JS
    calls in place (as a Durable Object's storage)."""
    isolate = Isolate(pool().pick(), limits, callables=callables)
    isolate.inline = inline
    source = (
        "const { PromisePrototypeThen: __then, stringify: __stringify } ="
        " __celld_primordials;\n"
        '__celld_host.on("run", (m) => {\n'
        "  const env = globalThis.__celld_cloudflare.env;\n"
        f"  __then((async () => {{ {body} }})(),\n"
        "    (value) => __celld_host.notify(\n"
        '      "result", { json: __stringify(value === undefined ? null : value) }),\n'
        "    (error) => __celld_host.notify(\n"
        '      "result", { error: __celld_host.describeError(error) }),\n'
        "  );\n"
        "});\n"
    )
    harness = Script("harness.js", source)
    await isolate.load(runtime_scripts() + extra + (harness,))
    loop = asyncio.get_running_loop()
    done: asyncio.Future[dict[str, Any]] = loop.create_future()

    def on_result(message: dict[str, Any]) -> None:
        if not done.done():
            done.set_result(message)

    def on_fault(fault: Exception) -> None:
        if not done.done():
            done.set_exception(fault)

    all_ops = isolate_ops()
    all_ops.update(ops or {})
    all_ops["result"] = on_result
    host = IsolateHost(isolate, all_ops, on_fault=on_fault)
    if env is not None:
        host.post({"k": "env", "vars": {}, "workflows": [], **env})
    host.post({"k": "run"})
    try:
        message = await asyncio.wait_for(done, timeout)
    finally:
        await host.close()
    if "error" in message:
        raise JsError(message["error"]["name"], message["error"]["message"])
    return json.loads(message["json"])


def run_js(body: str, **kwargs: Any) -> Any:
    """Synchronous wrapper for tests that are not async."""
    return asyncio.run(run_js_async(body, **kwargs))
