# ruff: noqa: E501 - the JS snippets read better unwrapped
"""Headers, Request, Response, the small ReadableStream and the wire helpers."""

from __future__ import annotations

import base64

import pytest

from tests.jsharness import JsError, run_js_async


async def test_headers_semantics() -> None:
    result = await run_js_async(
        """
        const h = new Headers({"Content-Type": "text/html", "X-B": " 1 "});
        h.append("x-b", "2");
        h.append("Set-Cookie", "a=1");
        h.append("set-cookie", "b=2");
        const out = {entries: [...h], combined: h.get("X-B"), cookies: h.getSetCookie(),
                     cookieGet: h.get("set-cookie"), has: [h.has("CONTENT-TYPE"), h.has("nope")]};
        h.set("X-B", "3");
        h.delete("content-type");
        out.after = [...h.keys()];
        out.fromPairs = [...new Headers([["A", "1"], ["a", "2"]])];
        out.copy = [...new Headers(h)].length;
        out.errors = [];
        for (const [k, v] of [["bad name", "x"], ["x", "a\\nb"], ["", "x"], ["x", "\\u0100"]]) {
          try { new Headers().append(k, v); out.errors.push(null); } catch (e) { out.errors.push(e.name); }
        }
        const each = [];
        h.forEach((v, k) => each.push(k + "=" + v));
        out.each = each;
        return out;
        """
    )
    assert result["entries"] == [
        ["content-type", "text/html"],
        ["set-cookie", "a=1"],
        ["set-cookie", "b=2"],
        ["x-b", "1, 2"],
    ]
    assert result["combined"] == "1, 2"
    assert result["cookies"] == ["a=1", "b=2"]
    assert result["cookieGet"] == "a=1, b=2"
    assert result["has"] == [True, False]
    assert result["after"] == ["set-cookie", "set-cookie", "x-b"]
    assert result["fromPairs"] == [["a", "1, 2"]]
    assert result["copy"] == 3
    assert result["errors"] == ["TypeError"] * 4
    assert result["each"] == ["set-cookie=a=1", "set-cookie=b=2", "x-b=3"]


async def test_header_values_and_pairs_on_every_path() -> None:
    """Plain values and arrays of two are taken as they are; everything else goes through
    trimming, the checks and the iterator protocol, with the same outcome."""
    result = await run_js_async(
        """
        const values = ["a", "a\\tb", " a ", "\\ta\\t", "", "  ", "a\\x7fb", "\\xff", "a b"];
        const out = {values: values.map((v) => new Headers([["x", v]]).get("x"))};
        const odd = ["k", "v"];
        odd[Symbol.iterator] = function* () { yield "odd"; yield "pair"; };
        const iterable = {*[Symbol.iterator]() { yield "it"; yield "1"; }};
        out.pairs = [...new Headers([odd, iterable, new Set(["s", "2"])])];
        out.errors = [];
        for (const init of [[["a"]], [["a", "b", "c"]], ["ab"], [["x", "a\\rb"]], [["x", "\\u0100"]]]) {
          try { new Headers(init); out.errors.push(null); } catch (e) { out.errors.push(e.name); }
        }
        return out;
        """
    )
    assert result["values"] == ["a", "a\tb", "a", "a", "", "", "a\x7fb", "\xff", "a b"]
    assert result["pairs"] == [["it", "1"], ["odd", "pair"], ["s", "2"]]
    assert result["errors"] == ["TypeError"] * 5


async def test_a_request_signal_is_made_once_and_follows_its_parent() -> None:
    result = await run_js_async(
        """
        const plain = new Request("http://a/");
        const ctl = new AbortController();
        const parent = new Request("http://a/", {signal: ctl.signal});
        const child = new Request(parent);
        const copy = parent.clone();
        ctl.abort("why");
        return [plain.signal === plain.signal, plain.signal.aborted, child.signal.aborted,
                child.signal.reason, copy.signal.aborted, plain.clone().signal.aborted];
        """
    )
    assert result == [True, False, True, "why", True, False]


async def test_response_basics_and_content_types() -> None:
    result = await run_js_async(
        """
        const types = [];
        for (const body of ["s", new URLSearchParams("a=1"), new Uint8Array([1]), new ArrayBuffer(2),
                            new DataView(new ArrayBuffer(3)), null]) {
          types.push(new Response(body).headers.get("content-type"));
        }
        const r = new Response("hi", {status: 404, statusText: "Nope", headers: {"X-A": "1"}});
        const j = Response.json({a: [1]}, {status: 201, headers: {"x": "y"}});
        const jc = Response.json(1, {headers: {"content-type": "application/custom"}});
        return {
          types,
          basic: [r.status, r.statusText, r.ok, r.headers.get("x-a"), r.url, r.redirected, r.type,
                  await r.text()],
          json: [j.status, j.headers.get("content-type"), j.headers.get("x"), await j.json()],
          custom: jc.headers.get("content-type"),
          defaults: [new Response().status, new Response().ok, new Response().body],
          bytes: Array.from(await new Response(new Uint16Array([258])).bytes()),
          buffer: (await new Response("abc").arrayBuffer()).byteLength,
        };
        """
    )
    assert result["types"] == [
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded;charset=UTF-8",
        None,
        None,
        None,
        None,
    ]
    assert result["basic"] == [404, "Nope", False, "1", "", False, "default", "hi"]
    assert result["json"] == [201, "application/json", "y", {"a": [1]}]
    assert result["custom"] == "application/custom"
    assert result["defaults"] == [200, True, None]
    assert result["bytes"] == [2, 1]
    assert result["buffer"] == 3


async def test_response_static_constructors_and_errors() -> None:
    result = await run_js_async(
        """
        const out = {};
        const red = Response.redirect("https://a.com/x", 301);
        out.redirect = [red.status, red.headers.get("location")];
        try { red.headers.set("x", "1"); } catch (e) { out.immutable = e.message; }
        const err = Response.error();
        out.error = [err.status, err.type, err.ok];
        out.thrown = [];
        const attempts = [
          () => new Response("x", {status: 99}),
          () => new Response("x", {status: 204}),
          () => Response.redirect("https://a/", 200),
          () => Response.redirect("/relative"),
          () => Response.json(undefined),
        ];
        for (const f of attempts) {
          try { f(); out.thrown.push(null); } catch (e) { out.thrown.push(e.name); }
        }
        return out;
        """
    )
    assert result["redirect"] == [301, "https://a.com/x"]
    assert result["immutable"] == "Can't modify immutable headers."
    assert result["error"] == [0, "error", False]
    assert result["thrown"] == ["RangeError", "TypeError", "RangeError", "TypeError", "TypeError"]


async def test_body_can_be_read_once_and_clone_before() -> None:
    result = await run_js_async(
        """
        const r = new Response("once");
        const c = r.clone();
        const first = await r.text();
        let second = null;
        try { await r.text(); } catch (e) { second = e.message; }
        let cloneUsed = null;
        try { r.clone(); } catch (e) { cloneUsed = e.name; }
        return {first, second, used: r.bodyUsed, clone: await c.text(), cloneUsed};
        """
    )
    assert result["first"] == "once"
    assert result["second"].startswith("Body has already been used")
    assert result["used"] is True
    assert result["clone"] == "once"
    assert result["cloneUsed"] == "TypeError"


async def test_request_construction() -> None:
    result = await run_js_async(
        """
        const out = {};
        const a = new Request("https://x.com/a?b", {method: "post", body: "hi",
                                                   headers: {"X-Y": "z"}, redirect: "manual"});
        out.a = [a.method, a.url, a.headers.get("x-y"), a.headers.get("content-type"), a.redirect,
                 a.cf, a.signal instanceof AbortSignal, a.signal.aborted];
        const b = new Request(a, {headers: {q: "1"}});
        out.b = [b.method, b.url, b.headers.get("x-y"), b.headers.get("q"), b.redirect, await b.text(),
                 a.bodyUsed];
        out.methods = ["get", "Delete", "patch", "options", "custom"].map(
          (m) => new Request("http://a/", {method: m}).method);
        out.errors = [];
        const bad = [
          () => new Request("/relative"),
          () => new Request("http://a/", {method: "GET", body: "x"}),
          () => new Request("http://a/", {method: "CONNECT"}),
          () => new Request("http://a/", {method: "bad method"}),
          () => new Request("http://a/", {redirect: "sometimes"}),
        ];
        for (const f of bad) {
          try { f(); out.errors.push(null); } catch (e) { out.errors.push(e.name); }
        }
        const ctl = new AbortController();
        const s = new Request("http://a/", {signal: ctl.signal});
        ctl.abort("why");
        out.signal = [s.signal.aborted, s.signal.reason];
        const c = new Request("http://a/", {method: "PUT", body: "copy"}).clone();
        out.clone = [c.method, await c.text()];
        return out;
        """
    )
    assert result["a"] == [
        "POST",
        "https://x.com/a?b",
        "z",
        "text/plain;charset=UTF-8",
        "manual",
        None,
        True,
        False,
    ]
    assert result["b"] == ["POST", "https://x.com/a?b", None, "1", "manual", "hi", True]
    assert result["methods"] == ["GET", "DELETE", "PATCH", "OPTIONS", "custom"]
    assert result["errors"] == ["TypeError"] * 5
    assert result["signal"] == [True, "why"]
    assert result["clone"] == ["PUT", "copy"]


async def test_streams_as_bodies() -> None:
    result = await run_js_async(
        """
        const enc = new TextEncoder();
        const s = new ReadableStream({start(c) { c.enqueue(enc.encode("ab")); c.enqueue(enc.encode("c")); c.close(); }});
        const fromStream = await new Response(s).text();
        let n = 0;
        const pulled = new ReadableStream({pull(c) { n++; if (n > 3) c.close(); else c.enqueue(enc.encode(String(n))); }});
        const fromPull = await new Response(pulled).text();
        const r = new Response("streamed body");
        const reader = r.body.getReader();
        const chunks = [];
        for (;;) { const {value, done} = await reader.read(); if (done) break; chunks.push(value.length); }
        let reuse = null;
        try { await r.text(); } catch (e) { reuse = e.name; }
        const parts = [];
        for await (const chunk of new Response("it").body) parts.push(new TextDecoder().decode(chunk));
        const cloned = new Response(new ReadableStream({start(c) { c.enqueue(enc.encode("x")); c.close(); }}));
        const copy = cloned.clone();
        return {fromStream, fromPull, chunks, used: r.bodyUsed, reuse, parts,
                clones: [await cloned.text(), await copy.text()]};
        """
    )
    assert result["fromStream"] == "abc"
    assert result["fromPull"] == "123"
    assert result["chunks"] == [13]
    assert result["used"] is True
    assert result["reuse"] == "TypeError"
    assert result["parts"] == ["it"]
    assert result["clones"] == ["x", "x"]


async def test_wire_helpers() -> None:
    body = base64.b64encode(b"payload").decode()
    result = await run_js_async(
        f"""
        const req = __celld_web.requestFromWire({{method: "POST", url: "http://h/p?q=1",
            headers: [["content-type", "text/plain"], ["x-a", "1"], ["X-A", "2"]], body: "{body}"}});
        const get = __celld_web.requestFromWire({{method: "GET", url: "http://h/", headers: [], body: null}});
        const res = new Response("out", {{status: 201, statusText: "Made", headers: [["set-cookie", "a=1"], ["set-cookie", "b=2"]]}});
        return {{
          req: [req.method, req.url, req.headers.get("x-a"), await req.text()],
          get: [get.method, get.body],
          wire: await __celld_web.responseToWire(res),
          empty: await __celld_web.responseToWire(new Response(null, {{status: 204}})),
          frozen: Object.isFrozen(__celld_web),
        }};
        """
    )
    assert result["req"] == ["POST", "http://h/p?q=1", "1, 2", "payload"]
    assert result["get"] == ["GET", None]
    assert result["wire"] == {
        "status": 201,
        "statusText": "Made",
        "headers": [
            ["set-cookie", "a=1"],
            ["set-cookie", "b=2"],
            ["content-type", "text/plain;charset=UTF-8"],
        ],
        "body": base64.b64encode(b"out").decode(),
    }
    assert result["empty"]["body"] == ""
    assert result["frozen"] is True


async def test_response_to_wire_rejects_non_responses() -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async("return await __celld_web.responseToWire({status: 200});")
    assert caught.value.name == "TypeError"


async def test_missing_apis_throw_clear_errors() -> None:
    result = await run_js_async(
        """
        const out = [];
        for (const name of ["EventSource", "caches", "HTMLRewriter"]) {
          try { globalThis[name]; out.push(null); } catch (e) { out.push(e.message); }
        }
        out.push(await crypto.subtle.encrypt("AES-GCM", null, null)
          .catch((e) => e.name + ": " + e.message));
        out.push(await crypto.subtle.encrypt("AES-XTS", null, null)
          .catch((e) => e.name + ": " + e.message));
        return out;
        """
    )
    assert result[:3] == [
        f"celld does not provide {name} yet" for name in ["EventSource", "caches", "HTMLRewriter"]
    ]
    assert result[3] == "TypeError: key must be a CryptoKey"
    assert result[4] == "TypeError: key must be a CryptoKey"
