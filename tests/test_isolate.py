"""The isolate core: turns, host requests, limits and faults."""

from __future__ import annotations

from typing import Any

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


async def test_memory_exhausted_outside_any_handler_is_named_memory_not_null() -> None:
    """Memory filled where no JS handler catches it (a FinalizationRegistry callback) so
    completely that QuickJS cannot allocate the error: it throws a bare null, and the
    isolate's fault says memory."""
    from celld.isolate.isolate import IsolateFault

    with pytest.raises(IsolateFault) as caught:
        await run_js_async(
            "const registry = new FinalizationRegistry(() => {"
            "  const filler = []; for (let i = 0; ; i++) filler.push({ i }); });"
            "(() => { registry.register({}, 'held'); })();"
            "let junk = []; for (let i = 0; i < 100000; i++) junk.push({ i }); junk = null;"
            "await scheduler.wait(2000);",
            limits=Limits(memory_bytes=16 * 1024 * 1024),
            timeout=60,
        )
    assert caught.value.reason == "memory limit exceeded"
    assert "null" in caught.value.detail  # what QuickJS threw, said as such


async def test_microtask_loop_hits_cpu_limit() -> None:
    """A loop of short jobs is counted across jobs and turns, not per job."""
    from celld.isolate.isolate import IsolateFault

    with pytest.raises(IsolateFault) as caught:
        await run_js_async("for (;;) await null;", limits=Limits(cpu_ms=200))
    assert caught.value.reason == "CPU time limit exceeded"


async def test_timer_loop_is_not_a_cpu_streak() -> None:
    """Work that lets the job queue drain (waiting on the host) is not a runaway."""
    result = await run_js_async(
        "let n = 0; const t0 = Date.now();"
        "while (Date.now() - t0 < 400) { await new Promise((r) => setTimeout(r, 0)); n++; }"
        "return n > 0;",
        limits=Limits(cpu_ms=200),
    )
    assert result is True


async def _isolate_with(source: str, limits: Limits) -> Any:
    """A real isolate with the runtime and `source` loaded (a test script of its own)."""
    from celld.isolate.isolate import Isolate
    from celld.isolate.runtime import Script, runtime_scripts
    from tests.jsharness import pool

    isolate = Isolate(pool().pick(), limits)
    await isolate.load((*runtime_scripts(), Script("test.js", source)))
    return isolate


async def test_budget_counts_every_turn() -> None:
    """start_budget() gives one unit of work a CPU budget over all its turns."""
    import asyncio

    from celld.isolate.host import IsolateHost
    from celld.isolate.isolate import IsolateFault
    from celld.isolate.ops import isolate_ops

    isolate = await _isolate_with(
        "__celld_host.on('spin', async () => {"
        " for (;;) { const t = Date.now(); while (Date.now() - t < 5) {}"
        " await new Promise((r) => setTimeout(r, 0)); } });",
        Limits(cpu_ms=5_000),
    )
    faults: asyncio.Queue[IsolateFault] = asyncio.Queue()
    host = IsolateHost(isolate, isolate_ops(), on_fault=faults.put_nowait)
    try:
        isolate.start_budget(150)
        host.post({"k": "spin"})
        fault = await asyncio.wait_for(faults.get(), 20)
        assert fault.reason == "CPU time limit exceeded"
        assert isolate.fault is fault
        assert 150 <= isolate.cpu_used_ms < 1_000
    finally:
        await host.close()


def test_lone_surrogates_cross_the_bridge() -> None:
    """JSON.stringify escapes a lone surrogate, which orjson refuses; the bridge still carries
    the string both ways instead of stopping the isolate."""
    from tests.jsharness import run_js

    assert run_js('console.log("x\\ud800"); return "a\\ud800b"') == "a\ud800b"


async def test_an_answer_given_later_without_a_task() -> None:
    """A host operation may return a `Later`: JS gets its value, or its error, when it is
    settled; a withdrawn one sends nothing; until then it counts as host work."""
    import asyncio

    from celld.isolate.host import HostError, IsolateHost, Later
    from celld.isolate.ops import isolate_ops

    isolate = await _isolate_with(
        "__celld_host.on('ask', (m) => { __celld_host.request('t.later', {}).then("
        " (v) => __celld_host.notify('t.got', { n: m.n, v }),"
        " (e) => __celld_host.notify('t.got', { n: m.n, e: e.message })); });"
        # a barrier: told after every answer posted before it, in a job queued after theirs
        "__celld_host.on('mark', () => { Promise.resolve().then("
        " () => __celld_host.notify('t.got', { mark: true })); });",
        Limits(),
    )
    laters: list[Later] = []
    got: asyncio.Queue[dict[str, object]] = asyncio.Queue()

    def later(_: dict[str, object]) -> Later:
        laters.append(Later())
        return laters[-1]

    ops = {**isolate_ops(), "t.later": later, "t.got": got.put_nowait}
    host = IsolateHost(isolate, ops)
    try:
        for n in range(3):
            host.post({"k": "ask", "n": n})
        while len(laters) < 3:
            await asyncio.sleep(0.01)
        await host.wait_idle()
        assert host.outstanding == 3 and host.busy
        laters[1].withdraw()
        laters[0].resolve({"x": 1})
        laters[2].reject(HostError("no such thing", "TypeError"))
        # Posted after whatever settling the three posted: JS tells the mark after every
        # answer it got, so what arrives before the mark is every answer there was.
        host.post({"k": "mark"})
        told = [await asyncio.wait_for(got.get(), 10) for _ in range(3)]
        assert told[-1].get("mark") is True  # the withdrawn request never got an answer
        first, second = told[:2]
        assert {first["n"], second["n"]} == {0, 2}
        assert next(m for m in (first, second) if m["n"] == 0)["v"] == {"x": 1}
        assert next(m for m in (first, second) if m["n"] == 2)["e"] == "no such thing"
        await host.wait_idle()
        assert got.empty()
        assert host.outstanding == 0 and host.pending_ops == {}
    finally:
        await host.close()
