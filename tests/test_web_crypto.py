# ruff: noqa: E501 - the JS snippets read better unwrapped
"""crypto: the OS entropy pool, getRandomValues, randomUUID, subtle.digest."""

from __future__ import annotations

import hashlib
import re

import pytest

from celld.isolate.entropy import entropy_script
from celld.isolate.host import HostError
from celld.isolate.runtime import runtime_scripts
from celld.isolate.webops import op_entropy
from tests import jsharness
from tests.jsharness import JsError, run_js_async


@pytest.fixture(autouse=True)
def seeded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load the first-key script after the runtime, as the integrator must."""
    monkeypatch.setattr(
        jsharness, "runtime_scripts", lambda: runtime_scripts() + (entropy_script(),)
    )


async def test_get_random_values_fills_and_looks_uniform() -> None:
    result = await run_js_async(
        """
        const a = crypto.getRandomValues(new Uint8Array(65536));
        const counts = new Array(256).fill(0);
        for (const b of a) counts[b]++;
        const u32 = crypto.getRandomValues(new Uint32Array(4));
        const same = crypto.getRandomValues(new Uint8Array(16));
        const again = crypto.getRandomValues(new Uint8Array(16));
        const offset = new Uint8Array(8);
        crypto.getRandomValues(offset.subarray(4));
        return {min: Math.min(...counts), max: Math.max(...counts),
                differ: same.join() !== again.join(), u32: Array.from(u32),
                head: Array.from(offset.subarray(0, 4)), returned: crypto.getRandomValues(u32) === u32};
        """
    )
    # 65,536 bytes over 256 values: 256 expected each; these bounds are > 7 sigma.
    assert 150 < result["min"] <= result["max"] < 370
    assert result["differ"] is True
    assert len(set(result["u32"])) == 4
    assert result["head"] == [0, 0, 0, 0]
    assert result["returned"] is True


async def test_get_random_values_errors() -> None:
    result = await run_js_async(
        """
        const out = [];
        for (const arg of [new Uint8Array(65537), new Float64Array(2), new DataView(new ArrayBuffer(2)), [1]]) {
          try { crypto.getRandomValues(arg); out.push(null); } catch (e) { out.push(e.name); }
        }
        return out;
        """
    )
    assert result == [
        "QuotaExceededError",
        "TypeMismatchError",
        "TypeMismatchError",
        "TypeMismatchError",
    ]


async def test_random_uuid_format_and_uniqueness() -> None:
    uuids = await run_js_async("return Array.from({length: 200}, () => crypto.randomUUID());")
    pattern = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    assert all(pattern.match(u) for u in uuids)
    assert len(set(uuids)) == 200


async def test_isolates_get_different_streams() -> None:
    first = await run_js_async("return crypto.randomUUID();")
    second = await run_js_async("return crypto.randomUUID();")
    assert first != second


async def test_seed_function_is_gone_before_user_code() -> None:
    assert await run_js_async("return typeof __celld_entropy_seed;") == "undefined"


async def test_pool_refills_after_it_runs_low() -> None:
    # The first 2 KiB come with the isolate; drawing below 1 KiB left asks the host for
    # more, which arrives a turn later (a timer's wait is more than enough).
    result = await run_js_async(
        """
        const before = __celld_web.randomStats();
        crypto.getRandomValues(new Uint8Array(1500));
        const drawn = __celld_web.randomStats();
        await scheduler.wait(5);
        return {before, drawn, after: __celld_web.randomStats()};
        """
    )
    assert result["before"]["poolLeft"] == 2048
    assert result["before"]["requests"] == 0
    assert result["drawn"]["poolLeft"] == 548
    assert result["drawn"]["requests"] == 1
    assert result["after"]["refills"] == 2
    assert result["after"]["poolLeft"] == 548 + 16384


async def test_a_dry_pool_is_topped_up_by_the_seeded_generator() -> None:
    # One turn draws far more than the pool holds: the rest comes from the CTR_DRBG (seeded
    # with OS bytes), the draw succeeds at once, and only one refill is asked for.
    result = await run_js_async(
        """
        const out = [];
        for (let i = 0; i < 8; i++) out.push(crypto.getRandomValues(new Uint8Array(65536)));
        const stats = __celld_web.randomStats();
        const counts = new Array(256).fill(0);
        for (const chunk of out) for (const b of chunk) counts[b]++;
        const distinct = new Set(out.map((c) => c.slice(0, 16).join())).size;
        await scheduler.wait(5);
        return {stats, min: Math.min(...counts), max: Math.max(...counts), distinct,
                after: __celld_web.randomStats()};
        """
    )
    stats = result["stats"]
    assert stats["fromPool"] == 2048
    assert stats["fromGenerator"] == 8 * 65536 - 2048
    assert stats["requests"] == 1
    # 524,288 bytes over 256 values: 2048 expected each; these bounds are > 8 sigma.
    assert 1680 < result["min"] <= result["max"] < 2420
    assert result["distinct"] == 8
    # Having run dry, the pool asked for the largest delivery.
    assert result["after"]["poolLeft"] == 65536 - 48


async def test_first_key_also_arrives_without_the_seed_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jsharness, "runtime_scripts", runtime_scripts)
    result = await run_js_async(
        """
        let before = null;
        try { crypto.randomUUID(); } catch (e) { before = e.message; }
        await scheduler.wait(1);
        return {before, after: crypto.randomUUID().length};
        """
    )
    # The load-time entropy request is answered in the first turns.
    assert result["before"] is None or "no entropy yet" in result["before"]
    assert result["after"] == 36


async def test_seed_script_may_also_run_before_the_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        jsharness, "runtime_scripts", lambda: (entropy_script(),) + runtime_scripts()
    )
    result = await run_js_async(
        "return [crypto.randomUUID().length, typeof __celld_entropy_initial,"
        " typeof __celld_entropy_seed];"
    )
    assert result == [36, "undefined", "undefined"]


def test_entropy_op_returns_fresh_bytes_within_bounds() -> None:
    import base64

    a, b = op_entropy({"bytes": 4096}), op_entropy({"bytes": 4096})
    assert len(base64.b64decode(a)) == 4096
    assert a != b
    for wrong in (0, 48, 65537):
        with pytest.raises(HostError):
            op_entropy({"bytes": wrong})


@pytest.mark.parametrize("algorithm", ["SHA-1", "SHA-256", "SHA-384", "SHA-512", "MD5"])
async def test_digest_known_answers(algorithm: str) -> None:
    result = await run_js_async(
        f"""
        const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
        const data = new TextEncoder().encode("abc");
        return [hex(await crypto.subtle.digest("{algorithm}", data)),
                hex(await crypto.subtle.digest({{name: "{algorithm.lower()}"}}, data.buffer)),
                hex(await crypto.subtle.digest("{algorithm}", new Uint8Array(0)))];
        """
    )
    name = algorithm.replace("-", "").lower()
    assert result == [
        hashlib.new(name, b"abc").hexdigest(),
        hashlib.new(name, b"abc").hexdigest(),
        hashlib.new(name, b"").hexdigest(),
    ]


async def test_digest_errors_and_timing_safe_equal() -> None:
    result = await run_js_async(
        """
        const out = {};
        out.alg = await crypto.subtle.digest("SHA-3", new Uint8Array(1)).catch((e) => e.name);
        out.data = await crypto.subtle.digest("SHA-256", "text").catch((e) => e.name);
        const a = new Uint8Array([1, 2, 3]);
        out.equal = [crypto.subtle.timingSafeEqual(a, new Uint8Array([1, 2, 3])),
                     crypto.subtle.timingSafeEqual(a, new Uint8Array([1, 2, 4]))];
        return out;
        """
    )
    assert result == {"alg": "NotSupportedError", "data": "TypeError", "equal": [True, False]}


async def test_crypto_is_not_constructible() -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async("new Crypto();")
    assert caught.value.name == "TypeError"
