# ruff: noqa: E501 - the JS snippets read better unwrapped
"""Timers, scheduler.wait, AbortController/AbortSignal, events and small globals."""

from __future__ import annotations

import asyncio
from typing import Any

from celld.isolate.host import IsolateHost
from celld.isolate.isolate import Isolate, Limits
from celld.isolate.ops import isolate_ops
from celld.isolate.runtime import Script, runtime_scripts
from tests.jsharness import pool, run_js_async


async def test_timers_order_args_and_clear() -> None:
    result = await run_js_async(
        """
        const seen = [];
        setTimeout((a, b) => seen.push("t30:" + a + b), 30, "x", "y");
        setTimeout(() => seen.push("t0"));
        const cleared = setTimeout(() => seen.push("never"), 10);
        clearTimeout(cleared);
        setTimeout(() => seen.push("t10"), 10);
        queueMicrotask(() => seen.push("micro"));
        let n = 0;
        const iv = setInterval(() => { n++; if (n === 3) clearInterval(iv); }, 5);
        await new Promise((r) => setTimeout(r, 80));
        return {seen, n, type: typeof cleared, distinct: cleared !== iv};
        """
    )
    assert result["seen"] == ["micro", "t0", "t10", "t30:xy"]
    assert result["n"] == 3
    assert result["type"] == "number"
    assert result["distinct"] is True


async def test_timer_callback_errors_are_reported_not_fatal(caplog) -> None:  # noqa: ANN001
    result = await run_js_async(
        """
        setTimeout(() => { throw new Error("boom in timer"); }, 1);
        await scheduler.wait(20);
        return "alive";
        """
    )
    assert result == "alive"
    assert any("boom in timer" in r.getMessage() for r in caplog.records)


async def test_scheduler_wait_and_abortable_wait() -> None:
    result = await run_js_async(
        """
        const t0 = Date.now();
        await scheduler.wait(25);
        const waited = Date.now() - t0;
        const ctl = new AbortController();
        const p = scheduler.wait(10000, {signal: ctl.signal}).catch((e) => e.name);
        ctl.abort();
        return {waited, aborted: await p};
        """
    )
    assert result["waited"] >= 20
    assert result["aborted"] == "AbortError"


async def test_abort_controller_and_signal() -> None:
    result = await run_js_async(
        """
        const ctl = new AbortController();
        const events = [];
        ctl.signal.addEventListener("abort", (e) => events.push(e.type + ":" + (e.target === ctl.signal)));
        ctl.signal.onabort = () => events.push("onabort");
        ctl.abort("reason!");
        ctl.abort("again");
        let thrown = null;
        try { ctl.signal.throwIfAborted(); } catch (e) { thrown = e; }
        const dflt = new AbortController(); dflt.abort();
        const pre = AbortSignal.abort();
        const a = new AbortController(), b = new AbortController();
        const any = AbortSignal.any([a.signal, b.signal]);
        b.abort("b wins");
        const t0 = Date.now();
        const timeout = AbortSignal.timeout(20);
        await new Promise((r) => timeout.addEventListener("abort", r));
        let ctor = null;
        try { new AbortSignal(); } catch (e) { ctor = e.name; }
        return {
          events, aborted: ctl.signal.aborted, reason: ctl.signal.reason, thrown,
          dflt: [dflt.signal.reason.name, dflt.signal.reason instanceof DOMException],
          pre: [pre.aborted, pre.reason.name],
          any: [any.aborted, any.reason],
          anyAlready: AbortSignal.any([pre]).aborted,
          timeout: [timeout.reason.name, Date.now() - t0 >= 15],
          ctor,
        };
        """
    )
    assert result["events"] == ["abort:true", "onabort"]
    assert result["aborted"] is True
    assert result["reason"] == "reason!"
    assert result["thrown"] == "reason!"
    assert result["dflt"] == ["AbortError", True]
    assert result["pre"] == [True, "AbortError"]
    assert result["any"] == [True, "b wins"]
    assert result["anyAlready"] is True
    assert result["timeout"] == ["TimeoutError", True]
    assert result["ctor"] == "TypeError"


async def test_event_target() -> None:
    result = await run_js_async(
        """
        const t = new EventTarget();
        const seen = [];
        const h = (e) => seen.push("h:" + e.type);
        t.addEventListener("x", h);
        t.addEventListener("x", h);  // duplicates are ignored
        t.addEventListener("x", {handleEvent: (e) => seen.push("obj:" + e.detail)});
        t.addEventListener("x", () => seen.push("once"), {once: true});
        t.dispatchEvent(new CustomEvent("x", {detail: 7}));
        t.removeEventListener("x", h);
        t.dispatchEvent(new CustomEvent("x", {detail: 8}));
        const c = new EventTarget();
        c.addEventListener("y", (e) => { e.preventDefault(); e.stopImmediatePropagation(); });
        c.addEventListener("y", () => seen.push("skipped"));
        const notCancelled = c.dispatchEvent(new Event("y", {cancelable: true}));
        const ctl = new AbortController();
        c.addEventListener("z", () => seen.push("z"), {signal: ctl.signal});
        ctl.abort();
        c.dispatchEvent(new Event("z"));
        return {seen, notCancelled};
        """
    )
    assert result["seen"] == ["h:x", "obj:7", "once", "obj:8"]
    assert result["notCancelled"] is False


async def test_small_globals() -> None:
    result = await run_js_async(
        """
        const t1 = performance.now();
        await scheduler.wait(5);
        return {
          ua: navigator.userAgent,
          self: self === globalThis,
          perf: [performance.now() > t1, Math.abs(performance.timeOrigin - Date.now()) < 60000],
          enumerable: Object.keys(globalThis).filter((k) => ["fetch", "URL", "console", "crypto"].includes(k)),
          dom: [new DOMException("m", "NotFoundError").code, typeof structuredClone, typeof queueMicrotask],
        };
        """
    )
    assert result["ua"] == "Cloudflare-Workers"
    assert result["self"] is True
    assert result["perf"] == [True, True]
    assert result["enumerable"] == []
    assert result["dom"] == [8, "function", "function"]


# -- one heap per isolate ------------------------------------------------------------------


async def _timers_isolate(source: str) -> tuple[Any, Any, asyncio.Queue[dict[str, Any]]]:
    """A real isolate with the runtime and `source` loaded, served by a host whose `t.got`
    notifications land in the returned queue."""
    isolate = Isolate(pool().pick(), Limits(cpu_ms=120_000))
    await isolate.load((*runtime_scripts(), Script("test.js", source)))
    got: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def note(message: dict[str, Any]) -> None:
        got.put_nowait({k: v for k, v in message.items() if k != "op"})

    return isolate, IsolateHost(isolate, {**isolate_ops(), "t.got": note}), got


async def test_many_timers_hold_one_host_timer_until_cleared() -> None:
    isolate, host, got = await _timers_isolate(
        "const ids = [];"
        "__celld_host.on('set', (m) => {"
        "  for (let i = 0; i < m.n; i++) ids.push(setTimeout(() => {}, 600000 + (i % 997)));"
        "  __celld_host.notify('t.got', {set: ids.length}); });"
        "__celld_host.on('clear', () => {"
        "  for (const id of ids) clearTimeout(id);"
        "  __celld_host.notify('t.got', {cleared: ids.length}); });"
    )
    try:
        host.post({"k": "set", "n": 100_000})
        assert await asyncio.wait_for(got.get(), 120) == {"set": 100_000}
        await host.wait_idle()
        # 100,000 pending timers are one host request, not 100,000 tasks.
        assert host.pending_ops == {"timer": 1}
        assert host.outstanding == 1
        used = (await isolate.memory())["memory_used_size"]
        assert used < 80 * 1024 * 1024
        host.post({"k": "clear"})
        assert await asyncio.wait_for(got.get(), 120) == {"cleared": 100_000}
        await host.wait_idle()
        # Cleared, they no longer count as host work: the isolate is idle.
        assert host.pending_ops == {}
        assert not host.busy
    finally:
        await host.close()


async def test_timers_fire_by_deadline_then_in_the_order_they_were_set() -> None:
    result = await run_js_async(
        """
        const seen = [];
        const delays = [];
        let seed = 7;
        for (let i = 0; i < 300; i++) {
          seed = (seed * 1103515245 + 12345) % 2147483648;
          delays.push(seed % 40);
        }
        delays.forEach((d, i) => setTimeout(() => seen.push([d, i]), d));
        await scheduler.wait(150);
        const sorted = [...seen].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        return {count: seen.length, inOrder: JSON.stringify(seen) === JSON.stringify(sorted)};
        """
    )
    assert result == {"count": 300, "inOrder": True}


async def test_a_timer_callbacks_microtasks_run_before_the_next_timer() -> None:
    result = await run_js_async(
        """
        const seen = [];
        setTimeout(() => { seen.push("a"); queueMicrotask(() => seen.push("a.micro")); }, 5);
        setTimeout(() => seen.push("b"), 5);
        await scheduler.wait(40);
        return seen;
        """
    )
    assert result == ["a", "a.micro", "b"]


async def test_clearing_timers_from_callbacks_and_intervals_at_zero_ms() -> None:
    result = await run_js_async(
        """
        const seen = [];
        const later = setTimeout(() => seen.push("cleared by an earlier timer"), 10);
        setTimeout(() => { seen.push("first"); clearTimeout(later); }, 5);
        // A 0 ms interval runs once per batch: the timer after it still gets its turn.
        let spins = 0;
        const spinner = setInterval(() => { spins++; }, 0);
        setTimeout(() => { seen.push("after spinner"); clearInterval(spinner); }, 20);
        // Clearing an interval from its own callback stops it.
        let own = 0;
        const self = setInterval(() => { own++; clearInterval(self); }, 1);
        clearTimeout(12345678);  // unknown ids are ignored
        clearTimeout({ valueOf: () => later });  // objects with a numeric valueOf
        await scheduler.wait(60);
        return {seen, spinsStopped: spins > 0, own};
        """
    )
    assert result == {"seen": ["first", "after spinner"], "spinsStopped": True, "own": 1}


async def test_setting_more_timers_than_the_limit_throws_a_clear_error() -> None:
    result = await run_js_async(
        """
        const ids = [];
        let error = null;
        try {
          for (let i = 0; i < 300000; i++) ids.push(setTimeout(() => {}, 600000));
        } catch (e) {
          error = e.name + ": " + e.message;
        }
        const set = ids.length;
        for (const id of ids) clearTimeout(id);
        // Below the limit again: timers work.
        const fired = await new Promise((resolve) => setTimeout(() => resolve(true), 1));
        return {set, error, fired};
        """,
        limits=Limits(cpu_ms=120_000),
        timeout=180,
    )
    assert result["set"] == 200_000
    assert result["error"].startswith("RangeError: timers: limit reached")
    assert result["fired"] is True


async def test_timers_work_after_the_isolate_is_reset_for_another_run() -> None:
    """A reused isolate forgets the last run's host timer: a timer the new run sets later
    than the old one's still fires."""
    _, host, got = await _timers_isolate(
        "__celld_host.on('arm', (m) => { setTimeout(() => __celld_host.notify('t.got',"
        " {fired: m.name}), m.ms); });"
    )
    try:
        host.post({"k": "arm", "name": "old run", "ms": 20})
        await host.wait_idle()
        host.post({"k": "reset"})
        host.post({"k": "arm", "name": "new run", "ms": 60})
        assert await asyncio.wait_for(got.get(), 30) == {"fired": "new run"}
    finally:
        await host.close()


async def test_a_timer_set_in_a_later_turn_waits_its_whole_delay() -> None:
    """Timers count from their turn's clock: one read while the isolate loaded (a timer
    set at top level) is not reused by a turn long after."""
    _, host, got = await _timers_isolate(
        "setTimeout(() => {}, 1);"  # reads the clock while the isolate loads
        "__celld_host.on('arm', () => { const t0 = Date.now();"
        "  setTimeout(() => __celld_host.notify('t.got', {waited: Date.now() - t0}), 200); });"
    )
    try:
        await asyncio.sleep(0.5)  # the isolate sits loaded for a while before its first turn
        host.post({"k": "arm"})
        answer = await asyncio.wait_for(got.get(), 30)
        assert answer["waited"] >= 190
    finally:
        await host.close()
