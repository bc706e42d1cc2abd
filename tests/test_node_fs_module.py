"""node:fs, node:module, Brotli, node:dns, node:http and the unusable `node:` modules, in
real isolates with the full runtime and real host operations (the side-by-side answers of
wrangler dev are checked by compat/scenarios/test_node_modules.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import brotli
import pytest

from celld.isolate.program import build_program, bundle_files_scripts
from celld.isolate.runtime import Script, node_scripts
from tests.jsharness import JsError, run_js

PRELUDE = "const m = (name) => __celld_builtin_modules['node:' + name];\n"
ERR = (
    "const E = (f) => { try { return f(); }\n"
    "  catch (e) { return [e.code ?? null, e.message]; } };\n"
)


def node(body: str, extra: tuple[Script, ...] = ()):
    return run_js(PRELUDE + ERR + body, extra=extra + node_scripts())


def test_fs_tmp_devices_and_read_only_places() -> None:
    result = node(
        "const fs = m('fs');\n"
        "fs.writeFileSync('/tmp/a.txt', 'hello'); fs.appendFileSync('/tmp/a.txt', ' world');\n"
        "fs.mkdirSync('/tmp/d/e', { recursive: true }); fs.renameSync('/tmp/a.txt', '/tmp/d/a');\n"
        "return [fs.readFileSync('/tmp/d/a', 'utf8'), fs.readdirSync('/'),\n"
        "  fs.readdirSync('/tmp/d'), E(() => fs.writeFileSync('/bundle/x', 'y')),\n"
        "  E(() => fs.writeFileSync('/dev/full', 'y')),\n"
        "  E(() => fs.readFileSync('/tmp/nope')), E(() => fs.rmdirSync('/tmp/d')),\n"
        "  fs.readFileSync('/dev/null').length, E(() => fs.watch('/tmp')), process.cwd()];"
    )
    assert result == [
        "hello world",
        ["bundle", "tmp", "dev"],
        ["e", "a"],
        ["EPERM", "operation not permitted"],
        ["EPERM", "operation not permitted"],
        ["ENOENT", "no such file or directory, readAll '/tmp/nope'"],
        ["ENOTEMPTY", "directory not empty, rm 'd'"],
        0,
        ["ERR_UNSUPPORTED_OPERATION", "The requested operation is unsupported"],
        "/bundle",
    ]


def test_fs_bundle_holds_the_modules_and_create_require_loads_them(tmp_path: Path) -> None:
    """/bundle lists the Worker's modules from the entry's folder, with their text; a
    require() made by createRequire loads a CommonJS module of the bundle by its path."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "lib.cjs").write_text("module.exports = { answer: 42 };\n")
    (src / "index.js").write_text(
        'import fs from "node:fs";\nimport { createRequire } from "node:module";\n'
        'import "./lib.cjs";\n'
        "const require = createRequire('/bundle/index.js');\n"
        "export const seen = [fs.readdirSync('/bundle').sort(),\n"
        "  fs.readFileSync('/bundle/lib.cjs', 'utf8'), require('./lib.cjs').answer,\n"
        "  typeof require('node:zlib').gzipSync];\n"
        "globalThis.__seen = seen;\n"
    )
    program = build_program(src / "index.js", root=tmp_path, compatibility_flags=("nodejs_compat",))
    bundle = program.bundle
    assert bundle is not None
    files = bundle_files_scripts(bundle, src / "index.js")
    assert [s.name for s in files] == ["celld bundle files"]
    extra = files + node_scripts(frozenset(bundle.builtins)) + (Script("bundle", bundle.source),)
    result = run_js("return globalThis.__seen;", extra=extra)
    assert result == [
        ["index.js", "lib.cjs"],
        "module.exports = { answer: 42 };\n",
        42,
        "function",
    ]


def test_the_file_table_is_left_out_when_nothing_reads_files(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text('import os from "node:os";\nexport { os };\n')
    program = build_program(
        tmp_path / "index.js", root=tmp_path, compatibility_flags=("nodejs_compat",)
    )
    assert program.bundle is not None
    assert bundle_files_scripts(program.bundle, tmp_path / "index.js") == ()
    assert "__celld_bundle_files = {" not in program.script.source


def test_brotli_runs_on_the_host_with_the_callback_forms() -> None:
    text = "celld brotli " * 40
    result = node(
        f"const z = m('zlib'); const {{ promisify }} = m('util'); const text = {text!r};\n"
        "const packed = await promisify(z.brotliCompress)(text);\n"
        "const back = await promisify(z.brotliDecompress)(packed);\n"
        "let bad; try { await promisify(z.brotliDecompress)(Buffer.from('xx')); }\n"
        "  catch (e) { bad = e.message; }\n"
        "return [packed.toString('base64'), back.toString(), bad,\n"
        "  E(() => z.brotliDecompressSync(packed))[0]];"
    )
    assert base64.b64decode(result[0]) == brotli.compress(text.encode())
    assert result[1:] == [text, "Decompression failed", "ERR_METHOD_NOT_IMPLEMENTED"]


def test_dns_resolves_through_the_host() -> None:
    result = node(
        "const dns = m('dns');\n"
        "const one = await dns.promises.lookup('localhost', { family: 4 });\n"
        "const cb = await new Promise((r) =>\n"
        "  dns.lookup('localhost', 4, (e, a, f) => r([e, a, f])));\n"
        "let missing; try { await dns.promises.resolve4('no-such-name.invalid'); }\n"
        "  catch (e) { missing = [e.code, e.syscall]; }\n"
        "let txt; try { await dns.promises.resolveTxt('localhost'); } catch (e) { txt = e.code; }\n"
        "return [one, cb, missing, txt, E(() => dns.setServers([]))];"
    )
    assert result == [
        {"address": "127.0.0.1", "family": 4},
        [None, "127.0.0.1", 4],
        ["ENOTFOUND", "queryA"],
        "ENOTIMP",
        [None, "Not implemented"],
    ]


def test_http_arguments_and_server_refusal() -> None:
    result = node(
        "const http = m('http'), https = m('https');\n"
        "return [E(() => https.request('http://example.com/')),\n"
        "  E(() => http.validateHeaderName('bad name')), http.STATUS_CODES[418],\n"
        "  E(() => http.createServer(() => {}).listen(8080))[0]];"
    )
    assert result == [
        ["ERR_INVALID_PROTOCOL", 'Protocol "http:" not supported. Expected "https:"'],
        ["ERR_INVALID_HTTP_TOKEN", 'Header name must be a valid HTTP token ["bad name"]'],
        "I'm a Teapot",
        "ERR_METHOD_NOT_IMPLEMENTED",
    ]


def test_modules_a_worker_cannot_use_answer_as_workerd() -> None:
    result = node(
        "return [E(() => m('child_process').spawn('ls')), m('worker_threads').isMainThread,\n"
        "  m('net').isIP('::1'), E(() => m('vm').runInThisContext('1'))];"
    )
    assert result == [
        ["ERR_METHOD_NOT_IMPLEMENTED", "The child_process.spawn method is not implemented"],
        True,
        6,
        ["ERR_METHOD_NOT_IMPLEMENTED", "The runInThisContext method is not implemented"],
    ]


def test_a_module_outside_the_bundle_is_a_clear_error() -> None:
    with pytest.raises(JsError, match='No such module "bundle/nope.js"'):
        node("m('module').createRequire('/bundle/index.js')('./nope.js');")
