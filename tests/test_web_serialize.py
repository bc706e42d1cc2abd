# ruff: noqa: E501 - the JS snippets read better unwrapped
"""The tagged-JSON serializer shared with the Workflows engine, and structuredClone."""

from __future__ import annotations

import json

import pytest

from tests.jsharness import JsError, run_js_async


@pytest.mark.parametrize(
    "literal",
    ['{"a":1,"b":[1,2,{"c":null}],"d":"x","e":true}', "[]", "{}", '"s"', "1.5", "null", "false"],
)
async def test_plain_json_serializes_to_exactly_its_json(literal: str) -> None:
    text = await run_js_async(f"return __celld_serialize({literal});")
    assert text == json.dumps(json.loads(literal), separators=(",", ":"))


async def test_special_values_are_tagged() -> None:
    result = await run_js_async(
        """
        return [undefined, NaN, Infinity, -Infinity, -0, 10n, new Date(5), /a.b/gi,
                new Map([[1, "a"]]), new Set(["x"]), {$: 1, b: 2}]
          .map((v) => __celld_serialize(v));
        """
    )
    assert [json.loads(t) for t in result] == [
        {"$": "undefined"},
        {"$": "NaN"},
        {"$": "Infinity"},
        {"$": "-Infinity"},
        {"$": "-0"},
        {"$": "BigInt", "v": "10"},
        {"$": "Date", "v": 5},
        {"$": "RegExp", "source": "a.b", "flags": "gi"},
        {"$": "Map", "v": [[1, "a"]]},
        {"$": "Set", "v": ["x"]},
        {"$": "Object", "v": [["$", 1], ["b", 2]]},
    ]


async def test_round_trip_of_every_supported_type() -> None:
    result = await run_js_async(
        r"""
        const checks = {};
        const rt = (v) => __celld_deserialize(__celld_serialize(v));
        checks.primitives = (() => {
          const v = rt([undefined, NaN, Infinity, -Infinity, -0, 0, 12345678901234567890n, "s", true, null]);
          return v[0] === undefined && Number.isNaN(v[1]) && v[2] === Infinity && v[3] === -Infinity
            && Object.is(v[4], -0) && Object.is(v[5], 0) && v[6] === 12345678901234567890n
            && v[7] === "s" && v[8] === true && v[9] === null;
        })();
        const d = rt(new Date(1700000000123));
        checks.date = d instanceof Date && d.getTime() === 1700000000123;
        checks.invalidDate = Number.isNaN(rt(new Date(NaN)).getTime());
        const re = rt(/x+/my);
        checks.regexp = re instanceof RegExp && re.source === "x+" && re.flags === "my";
        const m = rt(new Map([[{k: 1}, new Set([1, 2])], ["b", 2]]));
        checks.map = m instanceof Map && m.size === 2 && [...m.keys()][0].k === 1 && [...m.values()][0].has(2);
        const buf = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]).buffer;
        const ab = rt(buf);
        checks.arrayBuffer = ab instanceof ArrayBuffer && new Uint8Array(ab).join() === "1,2,3,4,5,6,7,8";
        const types = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
                       Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array];
        checks.typed = types.every((T) => {
          const src = new T(buf, 0, 8 / T.BYTES_PER_ELEMENT);
          const out = rt(src);
          return out instanceof T && out.length === src.length && out.join() === src.join();
        });
        const view = rt(new Uint8Array(buf, 2, 3));
        checks.viewOwnBytes = view.length === 3 && view.buffer.byteLength === 3 && view.join() === "3,4,5";
        const dv = rt(new DataView(buf, 4, 2));
        checks.dataView = dv instanceof DataView && dv.byteLength === 2 && dv.getUint8(0) === 5;
        const errors = [new TypeError("t"), new RangeError("r"), new SyntaxError("s"), new Error("e"),
                        new DOMException("gone", "AbortError")];
        checks.errors = errors.every((e) => {
          const out = rt(e);
          return Object.getPrototypeOf(out) === Object.getPrototypeOf(e) && out.name === e.name
            && out.message === e.message && out.stack === e.stack;
        });
        const custom = new Error("c", {cause: {why: 1}});
        custom.name = "MyError";
        const cOut = rt(custom);
        checks.customError = cOut instanceof Error && cOut.name === "MyError" && cOut.cause.why === 1;
        const agg = rt(new AggregateError([new Error("x")], "many"));
        checks.aggregate = agg instanceof AggregateError && agg.errors[0].message === "x";
        const w = rt([Object(true), Object(2), Object("s")]);
        checks.wrappers = w[0] instanceof Boolean && w[0].valueOf() === true && w[1] instanceof Number
          && w[2] instanceof String && w[2].valueOf() === "s";
        const esc = rt({$: "Ref", id: 0, nested: {$: {$: 1}}});
        checks.escaped = esc.$ === "Ref" && esc.id === 0 && esc.nested.$.$ === 1;
        checks.holes = JSON.stringify(rt([1, , 3])) === "[1,null,3]" && 1 in rt([1, , 3]);
        class Point { constructor() { this.x = 1; } get y() { return 2; } }
        const p = rt(new Point());
        checks.classInstance = Object.getPrototypeOf(p) === Object.prototype && p.x === 1 && !("y" in p);
        return checks;
        """
    )
    assert {k: v for k, v in result.items() if v is not True} == {}


async def test_cycles_and_shared_references() -> None:
    result = await run_js_async(
        """
        const shared = {s: 1};
        const root = {a: shared, b: shared, list: [shared]};
        root.self = root;
        const m = new Map(); m.set("me", m);
        const text = __celld_serialize(root);
        const back = __celld_deserialize(text);
        const mb = structuredClone(m);
        return {text, shared: back.a === back.b && back.list[0] === back.a, cycle: back.self === back,
                map: mb.get("me") === mb && mb !== m,
                noIdsWithoutSharing: __celld_serialize({x: {y: 1}, z: [1]})};
        """
    )
    assert result["shared"] is True
    assert result["cycle"] is True
    assert result["map"] is True
    assert result["noIdsWithoutSharing"] == '{"x":{"y":1},"z":[1]}'
    assert json.loads(result["text"])["$"] == "Def"


async def test_uncloneable_values_throw_data_clone_error() -> None:
    result = await run_js_async(
        """
        const out = [];
        for (const v of [() => 1, Symbol("s"), {f() {}}, Promise.resolve(), new WeakMap()]) {
          try { structuredClone(v); out.push(null); } catch (e) { out.push([e.name, e instanceof DOMException]); }
        }
        try { structuredClone(1, {transfer: [new ArrayBuffer(1)]}); } catch (e) { out.push(e.name); }
        return out;
        """
    )
    assert result == [["DataCloneError", True]] * 5 + ["DataCloneError"]


async def test_structured_clone_copies() -> None:
    result = await run_js_async(
        """
        const src = {a: [1, {b: 2}], u: new Uint8Array([1])};
        const c = structuredClone(src);
        c.a[1].b = 3; c.u[0] = 9;
        return [src.a[1].b, src.u[0], c.a[1].b, structuredClone(undefined) === undefined];
        """
    )
    assert result == [2, 1, 3, True]


async def test_malformed_input_is_a_clear_error() -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async('__celld_deserialize(\'{"$":"Nope"}\');')
    assert "unknown tag" in caught.value.message
