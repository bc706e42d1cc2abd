"""The isolate core: turns, host requests, limits and faults."""

from __future__ import annotations

import pytest

from celld.isolate.isolate import Limits
from tests.jsharness import JsError, run_js_async


async def test_snippet_result_round_trips() -> None:
    assert await run_js_async("return {a: [1, 2], b: 'x'};") == {"a": [1, 2], "b": "x"}


async def test_host_request_settles_promise() -> None:
    result = await run_js_async(
        "const t0 = Date.now(); await __celld_host.request('timer', {ms: 30});"
        "return Date.now() - t0;"
    )
    assert result >= 25


async def test_unknown_host_operation_rejects_with_clear_error() -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async("await __celld_host.request('no-such-op', {});")
    assert "no-such-op" in caught.value.message


async def test_thrown_error_keeps_name_and_message() -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async("throw new TypeError('bad thing');")
    assert (caught.value.name, caught.value.message) == ("TypeError", "bad thing")


async def test_infinite_loop_hits_cpu_limit() -> None:
    from celld.isolate.isolate import IsolateFault

    with pytest.raises(IsolateFault) as caught:
        await run_js_async("for (;;) {}", limits=Limits(cpu_ms=200))
    assert caught.value.reason == "CPU time limit exceeded"


async def test_memory_bomb_hits_memory_limit() -> None:
    # QuickJS raises out-of-memory as a (catchable) InternalError; the allocation
    # that failed is released, so the request fails and the isolate lives on.
    with pytest.raises(JsError) as caught:
        await run_js_async(
            "const a = []; for (;;) a.push(new Array(100000).fill(1));",
            limits=Limits(memory_bytes=32 * 1024 * 1024),
        )
    assert "out of memory" in caught.value.message
