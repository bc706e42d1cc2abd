# ruff: noqa: E501 - the JS snippets read better unwrapped
"""fetch() against a real HTTP server on 127.0.0.1, through the isolate and httpx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from celld.isolate.webops import close_fetch_client
from tests.jsharness import JsError, run_js_async


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = [tuple(line.split(": ", 1)) for line in lines[1:] if line]
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
    body = await reader.readexactly(length) if length else b""
    status, reason, extra, payload = 200, "OK", [("Content-Type", "text/plain")], b"hello"
    if target == "/echo":
        payload = json.dumps(
            {
                "method": method,
                "headers": [[k.lower(), v] for k, v in headers],
                "body": body.decode(),
            }
        ).encode()
        extra = [("Content-Type", "application/json"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]
    elif target == "/redirect":
        status, reason, extra, payload = 302, "Found", [("Location", "/hello")], b""
    elif target == "/missing":
        status, reason, payload = 404, "Not Found", b"nope"
    elif target == "/slow":
        await asyncio.sleep(2)
    out = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(payload)}", "Connection: close"]
    out += [f"{k}: {v}" for k, v in extra]
    writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + payload)
    await writer.drain()
    writer.close()


@pytest.fixture
async def server() -> AsyncIterator[str]:
    srv = await asyncio.start_server(_handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.close()
        await close_fetch_client()


async def test_get_status_headers_body(server: str) -> None:
    result = await run_js_async(
        f"""
        const r = await fetch("{server}/hello");
        let immutable = null;
        try {{ r.headers.set("x", "1"); }} catch (e) {{ immutable = e.name; }}
        return [r.status, r.statusText, r.ok, r.headers.get("content-type"), r.url, r.redirected,
                await r.text(), immutable];
        """
    )
    assert result == [200, "OK", True, "text/plain", f"{server}/hello", False, "hello", "TypeError"]


async def test_post_sends_method_headers_body(server: str) -> None:
    result = await run_js_async(
        f"""
        const r = await fetch(new Request("{server}/echo", {{method: "POST", body: "data",
                                                          headers: {{"X-Test": "yes"}}}}));
        return {{echo: await r.json(), cookies: r.headers.getSetCookie()}};
        """
    )
    echo = result["echo"]
    assert echo["method"] == "POST"
    assert echo["body"] == "data"
    assert ["x-test", "yes"] in echo["headers"]
    assert ["content-type", "text/plain;charset=UTF-8"] in echo["headers"]
    assert not any(k == "user-agent" for k, _ in echo["headers"])
    assert result["cookies"] == ["a=1", "b=2"]


async def test_redirect_modes(server: str) -> None:
    result = await run_js_async(
        f"""
        const follow = await fetch("{server}/redirect");
        const manual = await fetch("{server}/redirect", {{redirect: "manual"}});
        let error = null;
        try {{ await fetch("{server}/redirect", {{redirect: "error"}}); }} catch (e) {{ error = [e.name, e.message]; }}
        return {{follow: [follow.status, follow.url, follow.redirected, await follow.text()],
                 manual: [manual.status, manual.headers.get("location"), manual.redirected],
                 error}};
        """
    )
    assert result["follow"] == [200, f"{server}/hello", True, "hello"]
    assert result["manual"] == [302, "/hello", False]
    assert result["error"][0] == "TypeError"
    assert result["error"][1].startswith("fetch failed")


async def test_http_error_status_is_not_an_exception(server: str) -> None:
    result = await run_js_async(
        f'const r = await fetch("{server}/missing"); return [r.status, r.ok, await r.text()];'
    )
    assert result == [404, False, "nope"]


async def test_connection_failure_is_type_error() -> None:
    srv = await asyncio.start_server(_handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    with pytest.raises(JsError) as caught:
        await run_js_async(f'await fetch("http://127.0.0.1:{port}/");')
    await close_fetch_client()
    assert caught.value.name == "TypeError"
    assert caught.value.message.startswith("fetch failed:")


async def test_unsupported_scheme_and_bad_url() -> None:
    result = await run_js_async(
        """
        const out = [];
        for (const u of ["ftp://a/", "/relative"]) {
          try { await fetch(u); out.push(null); } catch (e) { out.push(e.name); }
        }
        return out;
        """
    )
    assert result == ["TypeError", "TypeError"]


async def test_abort_rejects_with_reason_without_waiting(server: str) -> None:
    result = await run_js_async(
        f"""
        const t0 = Date.now();
        const ctl = new AbortController();
        setTimeout(() => ctl.abort(), 50);
        let name = null;
        try {{ await fetch("{server}/slow", {{signal: ctl.signal}}); }} catch (e) {{ name = e.name; }}
        let pre = null;
        try {{ await fetch("{server}/hello", {{signal: AbortSignal.abort("stop")}}); }} catch (e) {{ pre = e; }}
        let timeout = null;
        try {{ await fetch("{server}/slow", {{signal: AbortSignal.timeout(30)}}); }} catch (e) {{ timeout = e.name; }}
        return {{name, pre, timeout, elapsed: Date.now() - t0}};
        """
    )
    assert result["name"] == "AbortError"
    assert result["pre"] == "stop"
    assert result["timeout"] == "TimeoutError"
    assert result["elapsed"] < 1500


async def test_parallel_fetches_do_not_block_each_other(server: str) -> None:
    result = await run_js_async(
        f"""
        const t0 = Date.now();
        const slow = fetch("{server}/slow");
        const fast = await fetch("{server}/hello");
        const fastAt = Date.now() - t0;
        await fast.text();
        return fastAt;
        """
    )
    assert result < 1000
