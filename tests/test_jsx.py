"""JSX compiled as esbuild compiles it for wrangler.

tests/fixtures/jsx/vectors.json holds each case's source, its tsconfig and the JavaScript
esbuild 0.28.2 (wrangler's) made of it (see make_vectors.py there). Both esbuild's output and
the original source are bundled by celld and run in QuickJS against recording JSX runtimes;
the element trees they build must be the same. celld's own output must also keep every line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import quickjs

from celld.isolate.decorators import compile_decorators
from celld.isolate.jsx import JsxOptions, jsx_text
from celld.isolate.modules import ModuleError, _compile_jsx, bundle_worker
from celld.isolate.tsconfig import CompilerSettings, TsConfigs
from celld.isolate.typescript import strip_types

VECTORS = json.loads((Path(__file__).parent / "fixtures" / "jsx" / "vectors.json").read_text())

# A JSX runtime that records what it is called with (the same for esbuild's output and ours).
_RECORDER = r"""
const name = (type) => typeof type === "string" ? type : (type && type.name) || String(type);
const value = (v) => typeof v === "function" ? "fn:" + (v.name || "anonymous") : v;
const props = (p) => p === null ? null : Object.fromEntries(
  Object.entries(p).map(([k, v]) => [k, Array.isArray(v) ? v.map(value) : value(v)]));
export function Fragment() {}
export function jsx(type, p, key) { return { f: "jsx", type: name(type), props: props(p), key }; }
export function jsxs(type, p, key) { return { f: "jsxs", type: name(type), props: props(p), key }; }
export function jsxDEV(type, p, key, isStatic, source, self) {
  return { f: "jsxDEV", type: name(type), props: props(p), key, isStatic, source,
           self: self === undefined ? "undefined" : typeof self };
}
export function createElement(type, p, ...children) {
  return { f: "createElement", type: name(type), props: props(p), children: children.map(value) };
}
export function h(type, p, ...children) {
  return { f: "h", type: name(type), props: props(p), children: children.map(value) };
}
export function Frag() {}
"""


def _runtime(root: Path, package: str) -> None:
    folder = root / "node_modules" / package
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(
        json.dumps({"name": package, "type": "module", "main": "index.js"})
    )
    for name in ("index.js", "jsx-runtime.js", "jsx-dev-runtime.js"):
        (folder / name).write_text(_RECORDER)


def _run(entry: Path, root: Path) -> object:
    bundle = bundle_worker(entry, root=root, tsconfigs=TsConfigs())
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    return json.loads(ctx.eval("JSON.stringify(__celld_main.out)"))


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_same_elements_as_esbuild(case: dict, tmp_path: Path) -> None:
    root = tmp_path
    for package in ("react", "preact"):
        _runtime(root, package)
    (root / "src").mkdir()
    if case["tsconfig"] is not None:
        (root / "tsconfig.json").write_text(json.dumps(case["tsconfig"]))
    ours = root / "src" / case["file"]
    ours.write_text(case["source"])
    theirs = root / "src" / "esbuild.js"
    theirs.write_text(case["esbuild"]["ok"])
    expected = _run(theirs, root)
    assert expected, "esbuild's output built nothing"
    assert _run(ours, root) == expected


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_lines_stay_in_place(case: dict) -> None:
    text = case["source"]
    suffix = Path(case["file"]).suffix
    if suffix == ".tsx":
        text = strip_types(text, Path(case["file"]))
    settings = CompilerSettings(JsxOptions(runtime="automatic"))
    out = _compile_jsx(text.encode(), suffix, case["file"], "module", settings).decode()
    original = case["source"].splitlines()
    compiled = out.splitlines()
    # the runtime's imports come after the last line; nothing else moved
    assert all(line.startswith("import {") for line in compiled[len(original) :] if line)
    assert compiled[len(original) - 1] == original[-1]
    # code inside {...} keeps its line: `items.map(` is on the line it was written on
    for number, line in enumerate(original):
        if "items.map(" in line:
            assert "items.map(" in compiled[number]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("hello", "hello"),
        ("  both sides  ", "  both sides  "),
        ("\n  a\n  b\n", "a b"),
        ("first  \n   second", "first second"),
        ("a&amp;b", "a&b"),
        ("&#65;&#x42;", "AB"),
        ("&unknown;", "&unknown;"),
        ("\n \u00a0x\u00a0 \n", "x"),
        ("\n\n\n", ""),
        ("x\r\ny", "x y"),
    ],
)
def test_text_rules(raw: str, expected: str) -> None:
    assert jsx_text(raw) == expected


def test_syntax_error_is_reported_at_its_position(tmp_path: Path) -> None:
    (tmp_path / "index.tsx").write_text(
        "export const a = 1;\nexport const b = <div>\n  <p></div>;\n"
    )
    with pytest.raises(ModuleError, match=r"^index\.tsx:\d+:\d+: syntax error"):
        bundle_worker(tmp_path / "index.tsx", root=tmp_path)


def test_key_without_value_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tsconfig.json").write_text('{"compilerOptions": {"jsx": "react-jsx"}}')
    (tmp_path / "index.jsx").write_text("export const a = 1;\nexport const b = <div key />;\n")
    with pytest.raises(ModuleError, match=r"^index\.jsx:2:\d+: Please provide an explicit value"):
        bundle_worker(tmp_path / "index.jsx", root=tmp_path)


def test_tsconfig_extends_and_node_modules(tmp_path: Path) -> None:
    """`extends` is followed; files in node_modules ignore the project's tsconfig (esbuild);
    wrangler's `tsconfig` applies to every file."""
    _runtime(tmp_path, "react")
    (tmp_path / "base.json").write_text(
        '{ // JSONC\n "compilerOptions": {"jsx": "react", "jsxFactory": "h",}}'
    )
    (tmp_path / "tsconfig.json").write_text('{"extends": "./base.json"}')
    dep = tmp_path / "node_modules" / "dep"
    dep.mkdir()
    (dep / "package.json").write_text('{"name": "dep", "main": "index.jsx"}')
    (dep / "index.jsx").write_text('import * as React from "react";\nexport const d = <i />;\n')
    (tmp_path / "index.jsx").write_text(
        'import { h } from "react";\nimport { d } from "dep";\nexport const out = [<b />, d];\n'
    )
    assert [e["f"] for e in _run(tmp_path / "index.jsx", tmp_path)] == ["h", "createElement"]
    (tmp_path / "forced.json").write_text('{"compilerOptions": {"jsx": "react-jsx"}}')
    bundle = bundle_worker(
        tmp_path / "index.jsx", root=tmp_path, tsconfigs=TsConfigs(tmp_path / "forced.json")
    )
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    out = json.loads(ctx.eval("JSON.stringify(__celld_main.out)"))
    assert [e["f"] for e in out] == ["jsx", "jsx"]


def test_wrangler_factory_is_the_default(tmp_path: Path) -> None:
    _runtime(tmp_path, "react")
    (tmp_path / "index.jsx").write_text(
        'import { h, Frag } from "react";\nexport const out = [<b />, <></>];\n'
    )
    bundle = bundle_worker(
        tmp_path / "index.jsx", root=tmp_path, tsconfigs=TsConfigs(None, "h", "Frag")
    )
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    out = json.loads(ctx.eval("JSON.stringify(__celld_main.out)"))
    assert out == [
        {"f": "h", "type": "b", "props": None, "children": []},
        {"f": "h", "type": "Frag", "props": None, "children": []},
    ]


def test_commonjs_file_with_jsx(tmp_path: Path) -> None:
    """A CommonJS file keeps its format: the runtime comes through a hoisted require."""
    _runtime(tmp_path, "react")
    (tmp_path / "tsconfig.json").write_text('{"compilerOptions": {"jsx": "react-jsx"}}')
    (tmp_path / "lib.jsx").write_text("module.exports = { el: <a href='x'>y</a> };\n")
    (tmp_path / "index.js").write_text('import lib from "./lib.jsx";\nexport const out = lib.el;\n')
    assert _run(tmp_path / "index.js", tmp_path) == {
        "f": "jsx",
        "type": "a",
        "props": {"href": "x", "children": "y"},
    }


def test_decorators_keep_every_line(tmp_path: Path) -> None:
    """Multi-line decorators stay where they were; stack lines still name the source."""
    source = (
        "const seen = [];\n"
        "function tag(options) {\n"
        "  return (value, context) => { seen.push([context.kind, options.label]); };\n"
        "}\n"
        "@tag({\n"
        '  label: "class",\n'
        "})\n"
        "export class A {\n"
        "  @tag({\n"
        '    label: "method",\n'
        "  })\n"
        "  static m(\n"
        "  ) { throw new Error('here'); }\n"
        "}\n"
        "let stack = '';\n"
        "try { A.m(); } catch (e) { stack = e.stack; }\n"
        "export const out = { seen, stack };\n"
    )
    compiled = compile_decorators(source.encode(), "index.js", legacy=False).decode()
    original, lines = source.splitlines(), compiled.splitlines()
    assert lines[len(original) - 1] == original[-1]  # the helper comes after the last line
    assert "throw new Error('here')" in lines[12]
    (tmp_path / "index.js").write_text(source)
    bundle = bundle_worker(tmp_path / "index.js", root=tmp_path)
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    out = json.loads(ctx.eval("JSON.stringify(__celld_main.out)"))
    assert out["seen"] == [["method", "method"], ["class", "class"]]
    line, column = (int(n) for n in re.search(r"<input>:(\d+):(\d+)", out["stack"]).groups())
    assert bundle.locate(line, column)[:2] == ("index.js", 13)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("class A { @dec #x = 1 }", "1:11: decorators on private members"),
        ("class A { @dec accessor x = 1 }", "1:11: decorators on"),
        ("class A { m(@dec x) {} }", "1:13: Parameter decorators only work when experimental"),
        ("const f = @dec function () {}", "syntax error"),
    ],
)
def test_decorators_celld_refuses(tmp_path: Path, source: str, message: str) -> None:
    (tmp_path / "index.js").write_text(source + "\nexport {};\n")
    with pytest.raises(ModuleError, match=r"^index\.js:"):
        try:
            bundle_worker(tmp_path / "index.js", root=tmp_path)
        except ModuleError as error:
            assert message in str(error)
            raise


def test_decorated_field_without_semicolon(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text(
        "const kinds = [];\n"
        "const t = (value, context) => { kinds.push(context.kind); };\n"
        'class A { @t get g() { return 1 } @t ["k"] = 2 }\n'
        "export const out = { kinds, k: new A().k };\n"
    )
    assert _run(tmp_path / "index.js", tmp_path) == {"kinds": ["getter", "field"], "k": 2}
