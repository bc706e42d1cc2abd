"""CommonJS modules in a bundle, evaluated in real QuickJS contexts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import quickjs

from celld.isolate.modules import ModuleError, bundle_worker


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / next(iter(files))


def run(entry: Path, expression: str = "__celld_main.result"):
    bundle = bundle_worker(entry, root=entry.parent)
    ctx = quickjs.Context()
    ctx.eval("globalThis.__celld_builtin_modules = {};")
    ctx.eval(bundle.source)
    return json.loads(ctx.eval(f"JSON.stringify({expression})"))


def test_module_exports_exports_and_named_imports(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import add, { twice } from "./math.cjs";\n'
            'import * as ns from "./math.cjs";\n'
            'import obj from "./obj.js";\n'
            "export const result = [add(1, 2), twice(4), ns.twice(1), typeof ns.default, obj];\n",
            "math.cjs": "module.exports = function add(a, b) { return a + b; };\n"
            "module.exports.twice = (x) => x * 2;\n",
            "obj.js": "exports.a = 1;\nexports.b = require('./data.json').b;\n",
            "data.json": '{"b": [2]}',
        },
    )
    assert run(entry) == [3, 8, 2, "function", {"a": 1, "b": [2]}]


def test_es_module_interop_flag(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import d, { named } from "./compiled.js";\n'
            'import plain from "./plain.js";\n'
            "export const result = [d, named, plain.default, plain.x];\n",
            "compiled.js": 'Object.defineProperty(exports, "__esModule", { value: true });\n'
            'exports.default = "the default";\nexports.named = "n";\n',
            "plain.js": 'exports.default = "inner"; exports.x = 1;\n',
        },
    )
    assert run(entry) == ["the default", "n", "inner", 1]


def test_node_mode_importers_get_module_exports_as_default(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.mjs": 'import d, { named } from "./compiled.cjs";\n'
            'import fromJs from "./lib/user.js";\n'
            "export const result = [typeof d, d.default, named, fromJs];\n",
            "compiled.cjs": 'Object.defineProperty(exports, "__esModule", { value: true });\n'
            'exports.default = "the default";\nexports.named = "n";\n',
            "lib/package.json": '{"type": "module"}',
            "lib/user.js": 'import d from "../compiled.cjs";\nexport default typeof d;\n',
        },
    )
    assert run(entry) == ["object", "the default", "n", "object"]


def test_require_cycle_sees_partial_exports(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import a from "./a.js";\nexport const result = a;\n',
            "a.js": "exports.early = 1;\nconst b = require('./b.js');\n"
            "exports.fromB = b.seen;\nexports.late = 2;\n",
            "b.js": "const a = require('./a.js');\nexports.seen = JSON.stringify(a);\n",
        },
    )
    assert run(entry) == {"early": 1, "fromB": '{"early":1}', "late": 2}


def test_require_of_an_es_module_and_of_a_package(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.cjs": "const esm = require('./esm.mjs');\nconst pkg = require('pkg');\n"
            "module.exports = { result: [esm.value, esm.default, pkg.name, typeof require] };\n",
            "esm.mjs": "export const value = 5; export default 'd';\n",
            "node_modules/pkg/package.json": '{"main": "main.js"}',
            "node_modules/pkg/main.js": "module.exports = { name: 'pkg' };\n",
        },
    )
    assert run(entry, "__celld_main.default.result") == [5, "d", "pkg", "function"]


def test_requires_fail_when_they_run_not_when_loading(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import lib from "./lib.js";\nexport const result = lib;\n',
            "lib.js": "let optional = null;\n"
            "try { optional = require('not-installed'); } catch (e) { optional = e.code; }\n"
            "let dynamic;\n"
            "try { require('x' + 1); } catch (e) { dynamic = e.message; }\n"
            "if (true) { module.exports = { optional, dynamic }; return; }\n"
            "module.exports = 'unreached';\n",
        },
    )
    result = run(entry)
    assert result["optional"] == "MODULE_NOT_FOUND"
    assert "Cannot find module 'x1'" in result["dynamic"]


def test_sloppy_mode_code_runs(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import s from "./sloppy.js";\nexport const result = s;\n',
            "sloppy.js": "function f() { return this === undefined ? 'strict' : 'sloppy'; }\n"
            "var o = 010;\nmodule.exports = [f(), o];\n",
        },
    )
    assert run(entry) == ["sloppy", 8]


def test_error_inside_a_package_names_its_file_and_line(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import boom from "lib";\nexport const result = 1;\n'
            "export function go() { boom(); }\n",
            "node_modules/lib/package.json": '{"main": "lib.js"}',
            "node_modules/lib/lib.js": "// a comment\nmodule.exports = function boom() {\n"
            "  throw new Error('inside the package');\n};\n",
        },
    )
    bundle = bundle_worker(entry, root=tmp_path)
    ctx = quickjs.Context()
    ctx.eval("globalThis.__celld_builtin_modules = {};")
    ctx.eval(bundle.source)
    stack = ctx.eval("(() => { try { __celld_main.go() } catch (e) { return e.stack } })()")
    line, column = map(int, re.search(r"<input>:(\d+):(\d+)", stack).groups())
    located = bundle.locate(line, column)
    assert located is not None
    assert located[:2] == ("node_modules/lib/lib.js", 3)
    assert located[2] == column  # the package's own lines and columns


def test_syntax_error_in_a_cjs_file_is_positioned(tmp_path: Path) -> None:
    entry = write(
        tmp_path, {"index.js": 'import "./bad.cjs";\n', "bad.cjs": "module.exports = (;\n"}
    )
    with pytest.raises(ModuleError, match=r"bad\.cjs:1:\d+: syntax error"):
        bundle_worker(entry, root=tmp_path)


def test_export_star_from_commonjs(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import * as ns from "./wrap.mjs";\n'
            "export const result = Object.keys(ns).sort();\n",
            "wrap.mjs": 'export * from "./impl.cjs";\nexport const own = 1;\n',
            "impl.cjs": "exports.alpha = 1; exports.beta = 2;\n",
        },
    )
    assert run(entry) == ["alpha", "beta", "own"]


def test_type_module_package_keeps_js_as_esm(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": "const exports = { x: 1 };\nexport const result = exports.x;\n",
            "package.json": '{"type": "module"}',
        },
    )
    assert run(entry) == 1
