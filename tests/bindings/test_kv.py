"""KV binding: real isolate, real SQLite file; expiry on the manual clock."""

from __future__ import annotations

import sqlite3

import pytest

from tests.bindings.harness import START_MS, Harness
from tests.jsharness import JsError


def test_values_survive_in_the_namespace_file(js_files: Harness) -> None:
    js = js_files
    js("""
        await env.KV.put("a", "1", {metadata: {m: true}});
        await env.KV.put("b", new Uint8Array([255, 0]));
    """)
    rows = (
        sqlite3.connect(js.state / "kv" / "kv-id.sqlite3")
        .execute("SELECT key, value, metadata FROM entries ORDER BY key")
        .fetchall()
    )
    assert rows == [("a", b"1", '{"m":true}'), ("b", b"\xff\x00", None)]
    # A fresh set of bindings (a restart) reads the same data.
    assert js(
        'return [await env.KV.get("a"), [...new Uint8Array(await env.KV.get("b", "arrayBuffer"))]]'
    ) == [
        "1",
        [255, 0],
    ]


def test_get_types_and_metadata(js: Harness) -> None:
    result = js(
        """
        await env.KV.put("j", JSON.stringify({x: 1}), {metadata: {tag: "t"}});
        const s = await env.KV.get("j", "stream");
        return {
          text: await env.KV.get("j"),
          json: await env.KV.get("j", {type: "json"}),
          stream: await new Response(s).text(),
          meta: await env.KV.getWithMetadata("j", "json"),
          missing: await env.KV.getWithMetadata("nope"),
          bulk: [...await env.KV.get(["j", "nope"], "json")],
        };
        """
    )
    assert result == {
        "text": '{"x":1}',
        "json": {"x": 1},
        "stream": '{"x":1}',
        "meta": {"value": {"x": 1}, "metadata": {"tag": "t"}, "cacheStatus": None},
        "missing": {"value": None, "metadata": None, "cacheStatus": None},
        "bulk": [["j", {"x": 1}], ["nope", None]],
    }


def test_non_utf8_and_lone_surrogates(js: Harness) -> None:
    result = js(
        """
        await env.KV.put("bin", new Uint8Array([0xc3, 0x28]));
        await env.KV.put("sur", "a\\ud800b");
        const bytes = new Uint8Array(await env.KV.get("bin", "arrayBuffer"));
        return [await env.KV.get("bin"), [...bytes], await env.KV.get("sur")];
        """
    )
    assert result == ["\ufffd(", [0xC3, 0x28], "a\ufffdb"]


def test_list_pages_in_byte_order(js: Harness) -> None:
    names = js(
        """
        for (const k of ["b", "a", "é", "z", "ab"]) await env.KV.put(k, k);
        const first = await env.KV.list({limit: 2});
        const rest = await env.KV.list({cursor: first.cursor});
        return [first.keys.map((k) => k.name), first.list_complete, rest.keys.map((k) => k.name),
                rest.list_complete, "cursor" in rest];
        """
    )
    assert names == [["a", "ab"], False, ["b", "z", "é"], True, False]


def test_expiry_follows_the_clock(js: Harness) -> None:
    later = START_MS // 1000 + 120
    js(
        'await env.KV.put("t", "v", {expirationTtl: 60});'
        f'await env.KV.put("e", "v", {{expiration: {later}}});'
    )
    listed = js("return (await env.KV.list()).keys")
    assert listed == [
        {"name": "e", "expiration": START_MS // 1000 + 120},
        {"name": "t", "expiration": START_MS // 1000 + 60},
    ]
    js.clock.advance(60_000)
    assert js('return [await env.KV.get("t"), await env.KV.get("e")]') == [None, "v"]
    js.clock.advance(60_000)
    assert js('return [(await env.KV.list()).keys, await env.KV.get("e")]') == [[], None]


@pytest.mark.parametrize(
    ("call", "name", "message"),
    [
        ('env.KV.get("")', "TypeError", "Key name cannot be empty."),
        ('env.KV.put("x".repeat(513), "v")', "Error",
         "KV PUT failed: 414 UTF-8 encoded length of 513 exceeds key length limit of 512."),
        ('env.KV.put("k", "v", {expirationTtl: 59})', "Error",
         "KV PUT failed: 400 Invalid expiration_ttl of 59. Expiration TTL must be at least 60."),
        ('env.KV.put("k", "x".repeat(25 * 1024 * 1024 + 1))', "Error",
         "KV PUT failed: 413 Value length of 26214401 exceeds limit of 26214400."),
        ('env.KV.put("k", {})', "TypeError",
         "KV put() accepts only strings, ArrayBuffers, ArrayBufferViews, and ReadableStreams "
         "as values."),
        ('env.KV.list({limit: 1001})', "Error",
         "KV GET failed: 400 Invalid key_count_limit of 1001. Please specify an integer less "
         "than 1000."),
        ('env.KV.get(Array.from({length: 101}, (_, i) => "k" + i))', "Error",
         "KV GET_BULK failed: 400 You can request a maximum of 100 keys"),
    ],
)  # fmt: skip
def test_errors_leave_the_namespace_untouched(
    js: Harness, call: str, name: str, message: str
) -> None:
    with pytest.raises(JsError) as caught:
        js(f"await {call};", timeout=60)
    assert (caught.value.name, caught.value.message) == (name, message)
    assert js("return (await env.KV.list()).keys") == []
