# ruff: noqa: E501 - the JS snippets read better unwrapped
"""crypto: the ChaCha20 DRBG, getRandomValues, randomUUID, subtle.digest."""

from __future__ import annotations

import hashlib
import re

import pytest

from celld.isolate.entropy import entropy_script
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


async def test_chacha20_block_known_answers() -> None:
    # RFC 8439 appendix A.1, test vectors 1 and 2 (all-zero key and nonce).
    result = await run_js_async(
        """
        const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
        return [hex(__celld_web.chacha20Block(new Uint8Array(32), 0)),
                hex(__celld_web.chacha20Block(new Uint8Array(32), 1))];
        """
    )
    assert result[0] == (
        "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
        "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"
    )
    assert result[1] == (
        "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
        "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f"
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


async def test_reseed_request_is_sent_and_mixed_in() -> None:
    # 4096 calls trigger an `entropy` request; its answer re-keys the generator.
    result = await run_js_async(
        """
        for (let i = 0; i < 4100; i++) crypto.getRandomValues(new Uint8Array(1));
        await scheduler.wait(5);
        return crypto.randomUUID().length;
        """
    )
    assert result == 36


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


def test_entropy_op_returns_32_fresh_bytes() -> None:
    import base64

    a, b = op_entropy({}), op_entropy({})
    assert len(base64.b64decode(a)) == 32
    assert a != b


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
