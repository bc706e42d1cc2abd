# ruff: noqa: E501 - the JS snippets read better unwrapped
"""URL and URLSearchParams against cases from the WHATWG URL spec and its tests."""

from __future__ import annotations

import json

import pytest

from tests.jsharness import run_js_async

# (input, base, expected href) - None means the parse must fail.
CASES = [
    ("http://EXAMPLE.com:80/a/../b/./c?x=1 2#f g", None, "http://example.com/b/c?x=1%202#f%20g"),
    ("https://user:pa ss@h.com:443", None, "https://user:pa%20ss@h.com/"),
    ("//x.org/p", "https://a.b/c", "https://x.org/p"),
    ("../d?q", "http://a/b/c/e", "http://a/b/d?q"),
    ("?y", "http://a/b?x#f", "http://a/b?y"),
    ("#g", "http://a/b?x#f", "http://a/b?x#g"),
    ("", "http://a/b?x#f", "http://a/b?x"),
    ("/", "file:///C:/a/b", "file:///C:/"),
    ("http://[::1]:8080/", None, "http://[::1]:8080/"),
    ("http://[2001:DB8:0:0:1:0:0:1]/", None, "http://[2001:db8::1:0:0:1]/"),
    ("http://[::ffff:192.168.0.1]/", None, "http://[::ffff:c0a8:1]/"),
    ("http://[1:2:3:4:5:6:7:8:9]/", None, None),
    ("http://0x7f.1/", None, "http://127.0.0.1/"),
    ("http://2130706433/", None, "http://127.0.0.1/"),
    ("http://0300.0250.0.1/", None, "http://192.168.0.1/"),
    ("http://192.168.0.257/", None, None),
    ("http://1.2.3.4.5/", None, None),
    ("mailto:Foo@Bar.com", None, "mailto:Foo@Bar.com"),
    ("file:///C:/x/../y", None, "file:///C:/y"),
    ("file://localhost/etc/passwd", None, "file:///etc/passwd"),
    ("file:c:\\foo\\bar", None, "file:///c:/foo/bar"),
    ("http://münchen.de/", None, "http://xn--mnchen-3ya.de/"),
    ("http://Ｇｏ.com/", None, "http://go.com/"),
    ("ws://h:80/", None, "ws://h/"),
    ("wss://h:443/", None, "wss://h/"),
    ("ftp://h:21/", None, "ftp://h/"),
    ("non-spec://host/p/../q", None, "non-spec://host/q"),
    ("non-spec:/.//p", None, "non-spec:/.//p"),
    ("http://a/b\\c", None, "http://a/b/c"),
    ("data:text/plain,hi there", None, "data:text/plain,hi there"),
    ("javascript:alert(1)", None, "javascript:alert(1)"),
    ("http://ex.com/?a='b'", None, "http://ex.com/?a=%27b%27"),
    ("non-spec://ex.com/?a='b'", None, "non-spec://ex.com/?a='b'"),
    ("http://a/%7Efoo/é", None, "http://a/%7Efoo/%C3%A9"),
    ("  http://a/\t\nb  ", None, "http://a/b"),
    ("http:\\\\a\\b", None, "http://a/b"),
    ("http:/a", None, "http://a/"),
    ("http://a:b@c:d/", None, None),
    ("http://exa mple.org", None, None),
    ("http://a%41.com/", None, "http://aa.com/"),
    ("http://%zz.com/", None, None),
    ("https://", None, None),
    ("relative/path", None, None),
    ("http://a:65536/", None, None),
    ("http://a/%2e%2E/b", None, "http://a/b"),
    ("sc://ñ.test/", None, "sc://%C3%B1.test/"),
    ("http://user@/", None, None),
    ("http://a/b?c#d e`", None, "http://a/b?c#d%20e%60"),
]


async def test_parse_cases() -> None:
    snippet = f"""
    const out = [];
    for (const [input, base] of {json.dumps([[c[0], c[1]] for c in CASES])}) {{
      try {{ out.push(new URL(input, base === null ? undefined : base).href); }}
      catch (e) {{ out.push(e instanceof TypeError ? null : "wrong error " + e); }}
    }}
    return out;
    """
    results = await run_js_async(snippet)
    mismatches = [
        (c[0], c[1], c[2], got) for c, got in zip(CASES, results, strict=True) if c[2] != got
    ]
    assert mismatches == []


async def test_components_and_origin() -> None:
    result = await run_js_async(
        """
        const u = new URL("https://us%20er:pw@Sub.Example.com:8443/p/a?x=1&y=2#frag");
        const keys = ["href", "origin", "protocol", "username", "password", "host", "hostname",
                      "port", "pathname", "search", "hash"];
        const parts = Object.fromEntries(keys.map((k) => [k, u[k]]));
        return {parts, blob: new URL("blob:https://a.com:444/uuid").origin,
                opaque: new URL("data:x").origin, file: new URL("file:///x").origin,
                json: JSON.stringify({u}), str: String(u)};
        """
    )
    assert result["parts"] == {
        "href": "https://us%20er:pw@sub.example.com:8443/p/a?x=1&y=2#frag",
        "origin": "https://sub.example.com:8443",
        "protocol": "https:",
        "username": "us%20er",
        "password": "pw",
        "host": "sub.example.com:8443",
        "hostname": "sub.example.com",
        "port": "8443",
        "pathname": "/p/a",
        "search": "?x=1&y=2",
        "hash": "#frag",
    }
    assert result["blob"] == "https://a.com:444"
    assert result["opaque"] == "null"
    assert result["file"] == "null"
    assert result["json"] == '{"u":"https://us%20er:pw@sub.example.com:8443/p/a?x=1&y=2#frag"}'
    assert result["str"] == result["parts"]["href"]


async def test_setters() -> None:
    result = await run_js_async(
        """
        const u = new URL("http://a/b?c#d");
        const seen = [];
        u.hostname = "B.com"; seen.push(u.href);
        u.port = "8080"; seen.push(u.href);
        u.port = "80"; seen.push(u.href);
        u.protocol = "https"; seen.push(u.href);
        u.protocol = "mailto"; seen.push(u.href);  // special -> non-special is refused
        u.pathname = "/a b/../c"; seen.push(u.href);
        u.search = "q=1 2"; seen.push(u.href);
        u.hash = "#x y"; seen.push(u.href);
        u.username = "me@x"; u.password = "p:w"; seen.push(u.href);
        u.host = "h.org:99"; seen.push(u.href);
        u.search = ""; u.hash = ""; seen.push(u.href);
        u.href = "http://z/"; seen.push(u.href);
        let bad = null;
        try { u.href = "nope"; } catch (e) { bad = e.name; }
        return {seen, bad};
        """
    )
    assert result["seen"] == [
        "http://b.com/b?c#d",
        "http://b.com:8080/b?c#d",
        "http://b.com/b?c#d",
        "https://b.com/b?c#d",
        "https://b.com/b?c#d",
        "https://b.com/c?c#d",
        "https://b.com/c?q=1%202#d",
        "https://b.com/c?q=1%202#x%20y",
        "https://me%40x:p%3Aw@b.com/c?q=1%202#x%20y",
        "https://me%40x:p%3Aw@h.org:99/c?q=1%202#x%20y",
        "https://me%40x:p%3Aw@h.org:99/c",
        "http://z/",
    ]
    assert result["bad"] == "TypeError"


async def test_can_parse_and_parse() -> None:
    result = await run_js_async(
        """
        return [URL.canParse("nope"), URL.canParse("/x", "http://a"), URL.canParse("x", "bad"),
                URL.parse("nope"), URL.parse("/x", "http://a").href];
        """
    )
    assert result == [False, True, False, None, "http://a/x"]


async def test_parsing_the_same_text_again_gives_a_url_of_its_own() -> None:
    """A URL parsed from the same text as the one before is its own object: changing one
    (setters, its search params) changes no other, nor what the next parse gives."""
    result = await run_js_async(
        """
        const text = "https://h.com/a/b?x=1#f";
        const first = new URL(text);
        first.pathname = "/changed";
        first.searchParams.append("y", "2");
        first.hash = "";
        const second = new URL(text);
        second.host = "other.org";
        const third = new URL(text);
        return [first.href, second.href, third.href, new URL("/c", text).href];
        """
    )
    assert result == [
        "https://h.com/changed?x=1&y=2",
        "https://other.org/a/b?x=1#f",
        "https://h.com/a/b?x=1#f",
        "https://h.com/c",
    ]


async def test_search_params_live_link() -> None:
    result = await run_js_async(
        """
        const u = new URL("http://a/?b=1&c=2");
        const p = u.searchParams;
        p.append("d", "x y&z");
        const afterAppend = u.href;
        p.delete("b");
        p.set("c", "3");
        const afterSet = u.search;
        u.search = "?z=9";
        const fromSearch = [p.get("z"), p.size];
        p.delete("z");
        return {afterAppend, afterSet, fromSearch, emptied: u.href, same: u.searchParams === p};
        """
    )
    assert result["afterAppend"] == "http://a/?b=1&c=2&d=x+y%26z"
    assert result["afterSet"] == "?c=3&d=x+y%26z"
    assert result["fromSearch"] == ["9", 1]
    assert result["emptied"] == "http://a/"
    assert result["same"] is True


async def test_search_params_methods() -> None:
    result = await run_js_async(
        r"""
        const p = new URLSearchParams("?a=1&b=%20+x&a=2&c&=e&%zz=%");
        const out = {};
        out.entries = [...p];
        out.getAll = p.getAll("a");
        out.get = [p.get("a"), p.get("missing")];
        out.has = [p.has("a"), p.has("a", "2"), p.has("a", "3")];
        p.delete("a", "1");
        out.afterDelete = p.toString();
        p.set("b", "new"); p.append("b", "again"); p.set("b", "only");
        out.afterSet = p.toString();
        const s = new URLSearchParams("z=1&a=2&z=0&b=3&a=1");
        s.sort();
        out.sorted = s.toString();
        out.record = new URLSearchParams({x: "1", y: "\u00e9 ~*'()!"}).toString();
        out.pairs = new URLSearchParams([["k", "v"], ["k", "w"]]).getAll("k");
        out.copy = new URLSearchParams(s).toString();
        out.keys = [...s.keys()];
        out.values = [...s.values()];
        const each = [];
        s.forEach((v, k) => each.push(k + v));
        out.each = each;
        try { new URLSearchParams([["only-one"]]); } catch (e) { out.badPair = e.name; }
        return out;
        """
    )
    assert result["entries"] == [
        ["a", "1"],
        ["b", "  x"],
        ["a", "2"],
        ["c", ""],
        ["", "e"],
        ["%zz", "%"],
    ]
    assert result["getAll"] == ["1", "2"]
    assert result["get"] == ["1", None]
    assert result["has"] == [True, True, False]
    assert result["afterDelete"] == "b=++x&a=2&c=&=e&%25zz=%25"
    assert result["afterSet"] == "b=only&a=2&c=&=e&%25zz=%25"
    assert result["sorted"] == "a=2&a=1&b=3&z=1&z=0"
    assert result["record"] == "x=1&y=%C3%A9+%7E*%27%28%29%21"
    assert result["pairs"] == ["v", "w"]
    assert result["copy"] == result["sorted"]
    assert result["keys"] == ["a", "a", "b", "z", "z"]
    assert result["values"] == ["2", "1", "3", "1", "0"]
    assert result["each"] == ["a2", "a1", "b3", "z1", "z0"]
    assert result["badPair"] == "TypeError"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("new URL('http://[::]/').hostname", "[::]"),
        ("new URL('http://[1:0:0:2:0:0:0:3]/').hostname", "[1:0:0:2::3]"),
        ("new URL('http://[0:0:0:0:0:0:0:1]/').hostname", "[::1]"),
        ("new URL('http://1.2.3.4./').hostname", "1.2.3.4"),
        ("new URL('HTTP://A.B/').protocol", "http:"),
        ("new URL('http://a/?%41').search", "?%41"),
    ],
)
async def test_host_forms(expression: str, expected: str) -> None:
    assert await run_js_async(f"return {expression};") == expected
