"""Blob, File, FormData, form bodies, Response.redirect with a URL, and HMAC keys in
crypto.subtle, in a real isolate with the full runtime."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from tests.jsharness import JsError, run_js


def test_blob_and_file() -> None:
    result = run_js(
        "const b = new Blob(['ab', new Uint8Array([99]), new Blob(['d'])],\n"
        "  { type: 'Text/Plain' });\n"
        "const f = new File([b], 'x.txt', { lastModified: 5 });\n"
        "return [b.size, b.type, await b.text(), await b.slice(1, 3).text(), f.name,\n"
        "  f.lastModified, f instanceof Blob, f.type, Object.prototype.toString.call(f),\n"
        "  await new Response(b.stream()).text()];"
    )
    assert result == [4, "text/plain", "abcd", "bc", "x.txt", 5, True, "", "[object File]", "abcd"]


def test_form_data_round_trip_through_a_multipart_body() -> None:
    result = run_js(
        "const form = new FormData();\n"
        "form.append('name', 'Ada'); form.append('tag', 'a'); form.append('tag', 'b');\n"
        "form.append('upload', new Blob(['file body\\r\\n--not-a-boundary'], { type: 'text/csv' }),"
        " 'data.csv');\n"
        "form.set('name', 'Ada L.');\n"
        "const request = new Request('https://x/', { method: 'POST', body: form });\n"
        "const type = request.headers.get('content-type');\n"
        "const parsed = await request.formData();\n"
        "const file = parsed.get('upload');\n"
        "return [type.startsWith('multipart/form-data; boundary='), parsed.get('name'),\n"
        "  parsed.getAll('tag'), file.name, file.type, await file.text(), [...parsed.keys()]];"
    )
    assert result == [
        True, "Ada L.", ["a", "b"], "data.csv", "text/csv", "file body\r\n--not-a-boundary",
        ["name", "tag", "tag", "upload"],
    ]  # fmt: skip


def test_urlencoded_form_body_and_bad_content_type() -> None:
    result = run_js(
        "const r = new Request('https://x/', { method: 'POST', body: 'a=1&b=two+words&a=3',"
        " headers: { 'content-type': 'application/x-www-form-urlencoded' } });\n"
        "const form = await r.formData();\n"
        "let error; try { await new Response('x').formData(); } catch (e) { error = e.name; }\n"
        "return [form.getAll('a'), form.get('b'), error];"
    )
    assert result == [["1", "3"], "two words", "TypeError"]


def test_response_redirect_with_a_url_object() -> None:
    result = run_js(
        "const r = Response.redirect(new URL('/next?q=1', 'https://example.com/a/b'), 301);\n"
        "return [r.status, r.headers.get('location')];"
    )
    assert result == [301, "https://example.com/next?q=1"]


@pytest.mark.parametrize("hash_name", ["SHA-1", "SHA-256", "SHA-384", "SHA-512"])
def test_hmac_sign_and_verify(hash_name: str) -> None:
    result = run_js(
        "const enc = new TextEncoder();\n"
        "const key = await crypto.subtle.importKey('raw', enc.encode('secret'),"
        f" {{ name: 'HMAC', hash: '{hash_name}' }}, true, ['sign', 'verify']);\n"
        "const sig = await crypto.subtle.sign('HMAC', key, enc.encode('message'));\n"
        "const ok = await crypto.subtle.verify({ name: 'HMAC' }, key, sig,\n"
        "  enc.encode('message'));\n"
        "const bad = await crypto.subtle.verify('HMAC', key, sig, enc.encode('messagE'));\n"
        "const raw = new Uint8Array(await crypto.subtle.exportKey('raw', key));\n"
        "return [btoa(String.fromCharCode(...new Uint8Array(sig))), ok, bad,\n"
        "  new TextDecoder().decode(raw), key.algorithm.hash.name, key.type, key.usages];"
    )
    algorithm = hash_name.replace("-", "").lower()
    expected = base64.b64encode(hmac.new(b"secret", b"message", algorithm).digest()).decode()
    assert result == [expected, True, False, "secret", hash_name, "secret", ["sign", "verify"]]
    assert hashlib.new(algorithm)  # the algorithm name used above is a real one


def test_hmac_key_rules() -> None:
    with pytest.raises(JsError, match='Requested key usage "sign" does not match'):
        run_js(
            "const key = await crypto.subtle.importKey('raw', new Uint8Array([1]),"
            " { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);\n"
            "await crypto.subtle.sign('HMAC', key, new Uint8Array(1));"
        )
    with pytest.raises(JsError, match='Unrecognized key import algorithm "AES-XTS"'):
        run_js(
            "await crypto.subtle.importKey('raw', new Uint8Array(16), 'AES-XTS', false,"
            " ['encrypt']);"
        )
