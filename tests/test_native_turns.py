"""Turns through direct calls into QuickJS (celld/isolate/native.py), and inline turns on
the event-loop thread: the same results and limits as turns on a JS thread, and a turn
too long for the loop is stopped so its owner can move the work."""

from __future__ import annotations

import pytest

from celld.isolate import native
from celld.isolate.isolate import (
    CPU_LIMIT_REASON,
    INLINE_LIMIT_MS,
    LONG_TURN_REASON,
    IsolateFault,
    Limits,
)
from tests.jsharness import JsError, pool, run_js_async


def test_the_direct_path_is_available_with_the_installed_binding() -> None:
    # The layout check passed: if this fails, every turn silently pays GIL hand-offs.
    assert native.available()


async def test_an_isolate_without_callables_takes_the_direct_path() -> None:
    from celld.isolate.isolate import Isolate
    from celld.isolate.runtime import runtime_scripts

    isolate = Isolate(pool().pick())
    await isolate.load(runtime_scripts())
    try:
        assert isolate.native
    finally:
        await isolate.close()


@pytest.mark.parametrize("inline", [False, True])
async def test_results_and_host_requests_round_trip(inline: bool) -> None:
    body = (
        "await __celld_host.request('timer', {ms: 5});"
        "return {text: 'h\\u00e9llo \\ud83d\\ude00', n: [1, 2.5, null], lone: '\\ud800'.length};"
    )
    assert await run_js_async(body, inline=inline) == {
        "text": "héllo 😀",
        "n": [1, 2.5, None],
        "lone": 1,
    }


@pytest.mark.parametrize("inline", [False, True])
async def test_errors_keep_their_name_and_message(inline: bool) -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async("throw new RangeError('out of range');", inline=inline)
    assert (caught.value.name, caught.value.message) == ("RangeError", "out of range")


async def test_an_inline_job_that_computes_too_long_is_stopped_as_a_long_turn() -> None:
    body = f"const until = Date.now() + {INLINE_LIMIT_MS * 10}; while (Date.now() < until) {{}}"
    with pytest.raises(IsolateFault) as caught:
        await run_js_async(body, inline=True)
    assert caught.value.long_turn
    assert caught.value.reason != CPU_LIMIT_REASON


async def test_the_same_job_on_a_js_thread_finishes() -> None:
    body = f"const until = Date.now() + {INLINE_LIMIT_MS * 3}; while (Date.now() < until) {{}}"
    assert await run_js_async(body + "; return 'done';") == "done"


async def test_an_inline_microtask_loop_yields_and_hits_the_cpu_limit() -> None:
    """Short jobs never trip the long-turn stop: the turn yields between them, and the
    busy streak is what the CPU limit counts."""
    with pytest.raises(IsolateFault) as caught:
        await run_js_async("for (;;) await null;", limits=Limits(cpu_ms=200), inline=True)
    assert caught.value.reason == CPU_LIMIT_REASON


@pytest.mark.parametrize("inline", [False, True])
async def test_a_runaway_loop_on_the_direct_path_hits_the_cpu_limit(inline: bool) -> None:
    with pytest.raises(IsolateFault) as caught:
        await run_js_async("for (;;) {}", limits=Limits(cpu_ms=5), inline=inline)
    assert caught.value.reason == CPU_LIMIT_REASON


async def test_deep_recursion_inline_is_a_catchable_error_and_the_isolate_goes_on() -> None:
    """Inline turns run on the event-loop thread, whose stack is smaller than a JS
    thread's: QuickJS's limit is measured for that thread, so recursion ends in a
    RangeError instead of overrunning the C stack."""
    body = (
        "function down(n) { return n === 0 ? 0 : 1 + down(n - 1); }"
        "let name = 'none';"
        "try { down(1e7); } catch (error) { name = error.name; }"
        "await __celld_host.request('timer', {ms: 1});"
        "return [name, down(1000)];"
    )
    for _ in range(3):
        try:
            result = await run_js_async(body, inline=True)
            break
        except IsolateFault as fault:
            # The first recursion this deep touches the loop thread's stack pages for the
            # first time, which on a busy machine can outlast an inline turn: that turn is
            # stopped (its owner would move it to a JS thread), and the next one is not.
            if fault.reason != LONG_TURN_REASON:
                raise
    else:
        raise AssertionError("every attempt was stopped as a long turn")
    assert result == ["RangeError", 1000]


async def test_out_of_memory_inline_is_catchable() -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async(
            "const a = []; for (;;) a.push(new Array(100000).fill(1));",
            limits=Limits(memory_bytes=32 * 1024 * 1024),
            inline=True,
        )
    assert "out of memory" in caught.value.message


async def test_an_inline_isolate_answers_other_calls_on_the_event_loop_thread() -> None:
    """Calls besides turns (memory, eval, the built-ins audit) go where the turns go: on its
    JS thread they would let the GIL go while an inline turn could enter the same runtime.
    Shown with the isolate's JS thread held busy: they answer all the same."""
    import asyncio
    import threading

    from celld.isolate.isolate import Isolate
    from celld.isolate.runtime import runtime_scripts
    from celld.isolate.threads import JsThread

    thread = JsThread("test-held")
    isolate = Isolate(thread)
    await isolate.load(runtime_scripts())
    isolate.inline = True
    release = threading.Event()
    held = thread.submit(lambda: release.wait(10))
    try:
        answers = await asyncio.wait_for(
            asyncio.gather(isolate.memory(), isolate.eval("1 + 1"), isolate.audit()), 5
        )
        assert answers[0]["memory_used_size"] > 0
        assert answers[1:] == [2, True]
    finally:
        release.set()
        held.result(10)
        await isolate.close()
        thread.shutdown()
