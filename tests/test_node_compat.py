"""The `node:` modules of nodejs_compat, run in a real isolate with the full runtime."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest

from celld.isolate.modules import ModuleError
from celld.isolate.program import build_program
from celld.isolate.runtime import node_scripts
from tests.jsharness import JsError, run_js

PRELUDE = "const m = (name) => __celld_builtin_modules['node:' + name];\n"


def node(body: str):
    return run_js(PRELUDE + body, extra=node_scripts())


MESSAGES = ["", "abc", "a" * 55, "b" * 56, "c" * 64, "héllo wörld " * 40]


@pytest.mark.parametrize("algorithm", ["md5", "sha1", "sha256", "sha384", "sha512"])
def test_hashes_and_hmacs_match_python(algorithm: str) -> None:
    results = node(
        f"const c = m('crypto'); const messages = {MESSAGES!r};\n"
        f"return messages.map((s) => [c.createHash('{algorithm}').update(s).digest('hex'),\n"
        f"  c.createHmac('{algorithm}', 'k' + s.length).update(s).digest('base64')]);"
    )
    import base64

    expected = [
        [
            hashlib.new(algorithm, s.encode()).hexdigest(),
            base64.b64encode(
                hmac.new(f"k{len(s)}".encode(), s.encode(), algorithm).digest()
            ).decode(),
        ]
        for s in MESSAGES
    ]
    assert results == expected


def test_hmac_with_a_long_key_and_chunked_updates() -> None:
    key = "K" * 200
    result = node(
        f"const h = m('crypto').createHmac('sha256', '{key}'); h.update('part one, ');"
        " h.update(new TextEncoder().encode('part two')); return h.digest('hex');"
    )
    assert result == hmac.new(key.encode(), b"part one, part two", "sha256").hexdigest()


def test_crypto_random_and_compare() -> None:
    result = node(
        "const c = m('crypto');\n"
        "const a = c.randomBytes(16), b = c.randomBytes(16);\n"
        "return [a.length, a.equals(b), c.timingSafeEqual(a, Buffer.from(a)),\n"
        "  /^[0-9a-f-]{36}$/.test(c.randomUUID()), c.randomInt(5, 6), c.webcrypto === crypto,\n"
        "  (() => { try { c.timingSafeEqual(a, b.subarray(1)); }\n"
        "    catch (e) { return e.name; } })()];"
    )
    assert result == [16, False, True, True, 5, True, "RangeError"]


def test_buffer() -> None:
    result = node(
        "const { Buffer: B } = m('buffer');\n"
        "const b = B.from('héllo');\n"
        "const n = B.alloc(8); n.writeUInt32BE(0xdeadbeef, 0); n.writeInt16LE(-2, 4);\n"
        "return [B === Buffer, b.toString('base64'), b.toString('hex'), b.length,\n"
        "  B.from('aGk', 'base64').toString(), B.from('6869', 'hex').toString('latin1'),\n"
        "  B.concat([B.from('a'), B.from('bc')]).toString(), B.byteLength('é'),\n"
        "  n.readUInt32BE(0), n.readInt16LE(4), b.subarray(1, 3) instanceof B,\n"
        "  B.compare(B.from('a'), B.from('b')), b.indexOf('llo'), JSON.stringify(B.from([1, 2])),\n"
        "  B.from('hi').toString('base64url'), B.isBuffer(new Uint8Array(1))];"
    )
    assert result == [
        True, "aMOpbGxv", "68c3a96c6c6f", 6, "hi", "hi", "abc", 2, 0xDEADBEEF, -2, True, -1, 3,
        '{"type":"Buffer","data":[1,2]}', "aGk", False,
    ]  # fmt: skip


def test_events() -> None:
    result = node(
        "const EventEmitter = m('events').default; const seen = [];\n"
        "const e = new EventEmitter();\n"
        "e.on('x', (v) => seen.push('on' + v)); e.once('x', (v) => seen.push('once' + v));\n"
        "e.prependListener('x', () => seen.push('first'));\n"
        "e.emit('x', 1); e.emit('x', 2);\n"
        "const later = m('events').once(e, 'y'); e.emit('y', 'a', 'b');\n"
        "let error; try { e.emit('error', new Error('boom')); } catch (x) { error = x.message; }\n"
        "return [seen, await later, e.listenerCount('x'), error, e.eventNames()];"
    )
    assert result == [["first", "on1", "once1", "first", "on2"], ["a", "b"], 2, "boom", ["x"]]


def test_util_path_url_assert() -> None:
    result = node(
        "const util = m('util'), path = m('path'), url = m('url'), assert = m('assert').default;\n"
        "const legacy = (x, cb) => cb(null, x * 2);\n"
        "let failed; try { assert.deepStrictEqual({ a: [1] }, { a: ['1'] }); }"
        " catch (e) { failed = [e.name, e.code]; }\n"
        "assert.throws(() => { throw new TypeError('t'); }, TypeError);\n"
        "await assert.rejects(Promise.reject(new Error('r')), /r/);\n"
        "return [await util.promisify(legacy)(21), util.format('%s=%d', 'a', 5),\n"
        "  util.inspect({ a: [1, { b: 2 }] }), util.types.isDate(new Date()),\n"
        "  util.isDeepStrictEqual(new Map([[1, 2]]), new Map([[1, 2]])),\n"
        "  path.join('/a/b', '../c', './d.txt'), path.resolve('x', '/y', 'z'),\n"
        "  path.basename('/q/w.e.ts', '.ts'), path.extname('a/b.js'),\n"
        "  path.relative('/a/b', '/a/c/d'),\n"
        "  path.dirname('/a/b/'), path.parse('/home/u/f.txt').name,\n"
        "  url.fileURLToPath('file:///tmp/a%20b'), url.pathToFileURL('/x y').href, failed];"
    )
    assert result == [
        42, "a=5", "{ a: [ 1, { b: 2 } ] }", True, True, "/a/c/d.txt", "/y/z", "w.e", ".js",
        "../c/d", "/a", "f", "/tmp/a b", "file:///x%20y", ["AssertionError", "ERR_ASSERTION"],
    ]  # fmt: skip


def test_process_global() -> None:
    result = node(
        "const order = []; process.nextTick(() => order.push('tick'));"
        " queueMicrotask(() => order.push('micro'));\n"
        "await null; await null;\n"
        "return [typeof process.env, process.platform, order, m('process').default === process];"
    )
    assert result == ["object", "linux", ["tick", "micro"], True]


def test_missing_node_api_is_a_clear_error() -> None:
    with pytest.raises(JsError, match="node:crypto createCipheriv is not provided.*crypto.subtle"):
        node("m('crypto').createCipheriv('aes-256-gcm');")


def test_zlib_round_trips_and_refuses_synchronous_brotli() -> None:
    import gzip
    import zlib

    data = "celld zlib " * 50
    result = node(
        f"const z = m('zlib'); const text = {data!r};\n"
        "let brotli = null; try { z.brotliCompressSync(text); } catch (e) { brotli = e.message; }\n"
        "return [z.gzipSync(text).toString('base64'),\n"
        "  z.deflateSync(text, {level: 9}).toString('base64'),\n"
        "  z.inflateSync(z.deflateSync(text)).toString(), z.crc32(text), brotli];"
    )
    import base64

    assert gzip.decompress(base64.b64decode(result[0])).decode() == data
    # pako is zlib ported: the same bytes as Python's zlib at the same level.
    assert base64.b64decode(result[1]) == zlib.compress(data.encode(), 9)
    assert result[2] == data
    assert result[3] == zlib.crc32(data.encode())
    assert "cannot answer synchronously" in result[4] and "zlib.brotliCompress" in result[4]


def test_node_imports_need_the_flag_and_a_provided_module(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text(
        'import { Buffer } from "node:buffer";\nexport { Buffer };\n'
    )
    with pytest.raises(ModuleError, match=r'compatibility_flags = \["nodejs_compat"\]'):
        build_program(tmp_path / "index.js", root=tmp_path)
    program = build_program(
        tmp_path / "index.js", root=tmp_path, compatibility_flags=("nodejs_compat",)
    )
    assert program.bundle is not None
    (tmp_path / "sq.js").write_text('import sq from "node:sqlite";\nexport { sq };\n')
    with pytest.raises(ModuleError, match="does not provide the Node.js module 'node:sqlite'"):
        build_program(tmp_path / "sq.js", root=tmp_path, compatibility_flags=("nodejs_compat",))
    # bare Node names mean the node: modules under the flag, as with wrangler
    (tmp_path / "bare.cjs").write_text(
        "const EventEmitter = require('events');\nmodule.exports = new EventEmitter();\n"
    )
    build_program(tmp_path / "bare.cjs", root=tmp_path, compatibility_flags=("nodejs_compat",))


def test_streams() -> None:
    result = node(
        "const { Readable, Writable, Transform, PassThrough, pipeline } = m('stream');\n"
        "const upper = new Transform({ transform(chunk, enc, cb) {"
        " cb(null, chunk.toString().toUpperCase()); } });\n"
        "const got = [];\n"
        "const sink = new Writable({ write(chunk, enc, cb) {\n"
        "  got.push(chunk.toString()); cb(); } });\n"
        "await m('stream/promises').pipeline(Readable.from(['a', 'b', 'c']), upper,"
        " new PassThrough(), sink);\n"
        "const iterated = [];\n"
        "for await (const item of Readable.from([1, 2, 3])) iterated.push(item);\n"
        "const r = new Readable({ read() {} }); r.setEncoding('utf8');\n"
        "const texts = []; r.on('data', (t) => texts.push(t));\n"
        "const ended = new Promise((resolve) => r.on('end', resolve));\n"
        "r.push('x'); r.push(Buffer.from('y')); r.push(null); await ended;\n"
        "const failed = await new Promise((resolve) => pipeline(\n"
        "  new Readable({ read() { this.destroy(new Error('source broke')); } }),\n"
        "  new PassThrough(), (error) => resolve(error && error.message)));\n"
        "return [got, iterated, texts, failed];"
    )
    assert result == [["A", "B", "C"], [1, 2, 3], ["x", "y"], "source broke"]


def test_only_the_node_modules_a_worker_imports_are_loaded(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text(
        'import { pipeline } from "node:stream";\n'
        "export default { fetch: () => new Response(typeof pipeline) };\n"
    )
    source = build_program(
        tmp_path / "index.js", root=tmp_path, compatibility_flags=("nodejs_compat",)
    ).script.source
    assert 'modules["node:stream"]' in source and 'modules["node:events"]' in source
    assert 'modules["node:crypto"]' not in source and 'modules["node:assert"]' not in source
    # the globals nodejs_compat defines are always there
    assert 'modules["node:process"]' in source and 'modules["node:buffer"]' in source
