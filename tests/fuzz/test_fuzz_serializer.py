"""Generated values through the serializer (structured clone) both ways.

Encoding: every generated value either round-trips exactly (serialize, deserialize,
serialize again gives the same text; structuredClone agrees) or, when it holds
something uncloneable, fails with a DataCloneError. Decoding: arbitrary (often
malformed) serialized text gives a value or an ordinary JS error, and the isolate
keeps working either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.jsfuzz import SyncIsolate, sync_isolate

# The value strategy is big; hypothesis warns about the size of its repr only.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def js() -> Iterator[SyncIsolate]:
    yield from sync_isolate()


# A generated value is (JS source, cloneable?).
def js_string(text: str) -> str:
    return json.dumps(text)


leaves = st.one_of(
    st.integers(min_value=-(2**60), max_value=2**60).map(lambda n: (str(n), True)),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: (repr(f), True)),
    st.sampled_from(["NaN", "-0", "Infinity", "-Infinity", "null", "undefined", "true"]).map(
        lambda s: (s, True)
    ),
    st.text(max_size=12).map(lambda s: (js_string(s), True)),
    st.integers(min_value=-(2**80), max_value=2**80).map(lambda n: (f"{n}n", True)),
    st.integers(min_value=-(10**13), max_value=10**13).map(lambda n: (f"new Date({n})", True)),
    st.just(("new Date(NaN)", True)),
    st.just(("/a+b/gi", True)),
    st.lists(st.integers(0, 255), max_size=6).map(lambda b: (f"new Uint8Array({b})", True)),
    st.lists(st.floats(width=32, allow_nan=False), max_size=3).map(
        lambda b: (f"new Float64Array({[float(x) for x in b]})", True)
    ),
    st.integers(0, 16).map(lambda n: (f"new ArrayBuffer({n})", True)),
    st.text(max_size=8).map(lambda m: (f"new TypeError({js_string(m)})", True)),
    st.sampled_from(["Object(1)", "Object('s')", "Object(true)", "Object(2n)"]).map(
        lambda s: (s, True)
    ),
    # Objects that only inherit from a built-in are plain objects to structured clone.
    st.sampled_from(
        [
            "Object.create(new Date(0))",
            "Object.create(new Map([[1, 2]]))",
            "Object.create(/x/)",
            "Object.create(new ArrayBuffer(2))",
            "Object.assign(Object.create(new Set()), {a: 1})",
            "({__proto__: Object(5), b: 2})",
        ]
    ).map(lambda s: (s, True)),
    st.sampled_from(
        ["() => 1", "Symbol('x')", "new WeakMap()", "Promise.resolve(1)", "new WeakSet()"]
    ).map(lambda s: (s, False)),
)


def containers(inner: st.SearchStrategy[tuple[str, bool]]) -> st.SearchStrategy[tuple[str, bool]]:
    def array(items: list[tuple[str, bool]]) -> tuple[str, bool]:
        return "[" + ", ".join(s for s, _ in items) + "]", all(ok for _, ok in items)

    def obj(items: list[tuple[str, tuple[str, bool]]]) -> tuple[str, bool]:
        # Computed keys: own properties, even for "__proto__".
        body = ", ".join(f"[{js_string(k)}]: {v}" for k, (v, _) in items)
        return "({" + body + "})", all(ok for _, (_, ok) in items)

    def mapping(items: list[tuple[str, tuple[str, bool]]]) -> tuple[str, bool]:
        # Distinct keys: a repeated key would replace (and hide) an earlier value.
        body = ", ".join(f"[{js_string(k)}, {v}]" for k, (v, _) in items)
        return f"new Map([{body}])", all(ok for _, (_, ok) in items)

    def set_(items: list[tuple[str, bool]]) -> tuple[str, bool]:
        return "new Set([" + ", ".join(s for s, _ in items) + "])", all(ok for _, ok in items)

    def cyclic(item: tuple[str, bool]) -> tuple[str, bool]:
        source = (
            f"(() => {{ const o = {{ v: {item[0]} }}; o.self = o; o.pair = [o, o]; return o; }})()"
        )
        return source, item[1]

    def with_cause(item: tuple[str, bool]) -> tuple[str, bool]:
        return f"new Error('e', {{ cause: {item[0]} }})", item[1]

    keys = st.one_of(st.text(max_size=6), st.sampled_from(["$", "__proto__", "0", "toJSON"]))
    return st.one_of(
        st.lists(inner, max_size=4).map(array),
        st.lists(st.tuples(keys, inner), max_size=4, unique_by=lambda kv: kv[0]).map(obj),
        st.lists(st.tuples(st.text(max_size=4), inner), max_size=3, unique_by=lambda kv: kv[0]).map(
            mapping
        ),
        st.lists(inner, max_size=3).map(set_),
        inner.map(cyclic),
        inner.map(with_cause),
    )


values = st.recursive(leaves, containers, max_leaves=20)

ROUND_TRIP = """(() => {
  const p = __celld_primordials;
  let v;
  try { v = (%s); } catch (e) { return p.JSONStringify({ skip: String(e) }); }
  try {
    const t1 = __celld_serialize(v);
    const t2 = __celld_serialize(__celld_deserialize(t1));
    const t3 = __celld_serialize(structuredClone(v));
    // (a value with binary data names its byte area by an attachment id, new each time)
    const bare = (t) => t.replace(/^\\{"\\$":"Blobs","at":\\d+,/, "{");
    return p.JSONStringify({ same: bare(t1) === bare(t2) && bare(t1) === bare(t3), t1, t2, t3 });
  } catch (e) {
    return p.JSONStringify({ error: e.name, message: String(e.message) });
  }
})()"""


@FUZZ
@given(values)
def test_values_round_trip_or_fail_with_data_clone_error(
    js: SyncIsolate, value: tuple[str, bool]
) -> None:
    source, cloneable = value
    result = js.run(ROUND_TRIP % source)
    if "skip" in result:  # the generated source itself was not valid JS
        return
    if cloneable:
        assert result.get("same") is True, (source, result)
    else:
        assert result.get("error") == "DataCloneError", (source, result)
        assert "could not be cloned" in result["message"]


TAGS = [
    "undefined", "NaN", "Infinity", "-Infinity", "-0", "BigInt", "Def", "Ref", "Date", "RegExp",
    "Map", "Set", "Object", "ArrayBuffer", "Error", "Boolean", "Number", "String",
    "BigIntObject", "Uint8Array", "DataView", "Float64Array", "Nope",
]  # fmt: skip
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=6)
)
tagged = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["v", "id", "source", "flags", "name", "k"]), inner),
        st.builds(
            lambda tag, fields: {"$": tag, **fields},
            st.sampled_from(TAGS),
            st.dictionaries(
                st.sampled_from(["v", "id", "source", "flags", "name", "message", "cause"]),
                inner,
                max_size=3,
            ),
        ),
    ),
    max_leaves=15,
)

DECODE = """(() => {
  const p = __celld_primordials;
  try {
    __celld_deserialize(%s);
    return p.JSONStringify({ ok: true });
  } catch (e) {
    return p.JSONStringify({ error: e instanceof Error ? e.name : typeof e });
  }
})()"""


@FUZZ
@given(st.one_of(tagged.map(json.dumps), st.text(max_size=40)))
def test_arbitrary_serialized_text_decodes_or_throws_an_ordinary_error(
    js: SyncIsolate, text: str
) -> None:
    result = js.run(DECODE % json.dumps(text))
    assert result.get("ok") or result["error"] in ("TypeError", "SyntaxError", "RangeError")
    assert js.isolate.fault is None
    assert js.run("__celld_primordials.JSONStringify(1 + 1)") == 2


def test_too_deep_and_cyclic_messages_are_clear_errors(js: SyncIsolate) -> None:
    result = js.run(
        """(() => {
      const p = __celld_primordials;
      let deep = {}; for (let i = 0; i < 1100; i++) deep = { next: deep };
      const cyclic = {}; cyclic.self = cyclic;
      const out = [];
      for (const value of [deep, cyclic]) {
        try {
          __celld_host.notify("log", { level: "log", text: "x", extra: value });
          out.push("sent");
        } catch (e) {
          out.push(e.name + ": " + e.message);
        }
      }
      try { __celld_serialize(deep); out.push("serialized"); } catch (e) { out.push(e.name); }
      return p.JSONStringify(out);
    })()"""
    )
    assert result[0].startswith("TypeError: celld: the value is nested more than 1000 levels")
    assert result[1].startswith("TypeError: celld: the value cannot be sent")
    assert result[2] == "RangeError"
