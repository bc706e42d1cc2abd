"""Values between operators and the engine (celld.server.values), checked against the
real JS serializer in a QuickJS isolate: what an operator types reaches run() as is,
and what JS stored reads back as plain JSON."""

from __future__ import annotations

import json

import pytest

from celld.server.values import decode, encode, iso, parse_iso
from tests.jsharness import run_js_async


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": [1, {"c": None}]},
        {"$": "Date", "v": 5},
        {"outer": {"$": {"$": 1}}},
        [1.5, "x", True, None],
        "text",
    ],
)
async def test_encoded_json_reaches_js_unchanged(value: object) -> None:
    text = encode(value)
    seen = await run_js_async(f"return JSON.stringify(__celld_deserialize({json.dumps(text)}));")
    assert json.loads(seen) == value


async def test_non_finite_and_negative_zero_reach_js_as_numbers() -> None:
    text = encode([float("nan"), float("inf"), -float("inf"), -0.0])
    result = await run_js_async(
        f"const v = __celld_deserialize({json.dumps(text)});"
        "return [Number.isNaN(v[0]), v[1] === Infinity, v[2] === -Infinity, Object.is(v[3], -0)];"
    )
    assert result == [True, True, True, True]


async def test_stored_js_values_decode_to_readable_json() -> None:
    texts = await run_js_async(
        """
        const shared = {s: 1};
        return [undefined, new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)), 10n,
                new Map([["k", 1]]), new Set([1, 2]), /a.b/g, new Uint8Array([1, 2, 3]),
                {$: 1, b: 2}, [shared, shared], new TypeError("bad"), NaN]
          .map((v) => __celld_serialize(v));
        """
    )
    assert [decode(t) for t in texts] == [
        None,
        "2026-01-02T03:04:05.006Z",
        "10n",
        [["k", 1]],
        [1, 2],
        "/a.b/g",
        "[Uint8Array 3 bytes]",
        {"$": 1, "b": 2},
        [{"s": 1}, {"s": 1}],
        {"name": "TypeError", "message": "bad"},
        "NaN",
    ]
    assert decode(None) is None


def test_iso_dates() -> None:
    assert iso(0) == "1970-01-01T00:00:00.000Z"
    assert iso(None) is None
    assert parse_iso("2026-01-02") == parse_iso("2026-01-02T00:00:00Z")
    assert parse_iso("2026-01-02T01:00:00+01:00") == parse_iso("2026-01-02T00:00:00Z")
    assert parse_iso(iso(1_796_000_000_123) or "") == 1_796_000_000_123
    with pytest.raises(ValueError, match="not an ISO 8601 date"):
        parse_iso("yesterday")
