# ruff: noqa: E501 - the JS snippets read better unwrapped
"""Timers, scheduler.wait, AbortController/AbortSignal, events and small globals."""

from __future__ import annotations

from tests.jsharness import run_js_async


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
