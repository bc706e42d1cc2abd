"""The module bundler, checked by evaluating real bundles in QuickJS."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import quickjs

from celld.isolate.modules import Bundle, ModuleError, bundle_worker

FIXTURES = Path(__file__).parent / "fixtures" / "modules"

WORKERS_JS = """
globalThis.__celld_builtin_modules = {
  "cloudflare:workers": {
    WorkflowEntrypoint: class WorkflowEntrypoint { kind = "builtin base"; },
    env: { FROM: "builtin" },
  },
};
"""


def evaluate(entry: Path, prelude: str = WORKERS_JS) -> tuple[quickjs.Context, Bundle]:
    bundle = bundle_worker(entry)
    ctx = quickjs.Context()
    ctx.eval(prelude)
    ctx.eval(bundle.source)
    return ctx, bundle


def js(ctx: quickjs.Context, expression: str):
    return json.loads(ctx.eval(f"JSON.stringify({expression})"))


def main(ctx: quickjs.Context) -> dict:
    return js(ctx, "Object.assign({}, globalThis.__celld_main)")


def drain(ctx: quickjs.Context) -> None:
    while ctx.execute_pending_job():
        pass


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / next(iter(files))


# --------------------------------------------------------------------------- corpus


def test_every_import_form() -> None:
    ctx, bundle = evaluate(FIXTURES / "imports" / "index.js")
    assert main(ctx)["results"] == {
        "def": "the default",
        "one": 1,
        "deux": 2,
        "keys": ["default", "one", "two"],
        "nsDefault": "the default",
        "def2": "the default",
        "uno": 1,
        "def3": "the default",
        "sameNamespace": True,
        "tag": "[object Module]",
        "log": ["side effect ran"],
    }
    assert bundle.files[0] == (FIXTURES / "imports" / "index.js").resolve()
    assert len(bundle.files) == 4


def test_every_export_form() -> None:
    ctx, _ = evaluate(FIXTURES / "exports" / "index.js")
    assert main(ctx)["results"] == {
        "fnNamed": ["named", "named"],
        "fnAnon": ["default", "anonymous"],
        "klass": ["Klass", "class"],
        "anonClass": ["default", "anonymous class"],
        "asyncFn": ["default", "AsyncFunction"],
        "gen": ["default", [1, 2]],
        "arrow": ["default", "arrow"],
        "decls": ["K", "f", "first", "rest", "second", "v", "x", "y"],
        "declValues": [1, 2, {"z": 3, "w": 4}, "a", "dflt", "var", "f", "K"],
        "clause": ["a", "c", "b"],
        "reexportKeys": ["default", "fromStar", "nested", "one", "ownDefault", "renamed"],
        "reexportValues": ["named", 1, "star", "deep", "a"],
    }


def test_entry_namespace_is_frozen_null_prototype() -> None:
    ctx, _ = evaluate(FIXTURES / "imports" / "index.js")
    assert js(ctx, "Object.getPrototypeOf(__celld_main)") is None
    assert js(ctx, "Object.isFrozen(__celld_main)") is True
    assert (
        js(
            ctx,
            "(() => { 'use strict'; try { __celld_main.results = 1 } "
            "catch (e) { return e.name } })()",
        )
        == "TypeError"
    )


def test_live_bindings() -> None:
    ctx, _ = evaluate(FIXTURES / "live" / "index.js")
    exports = main(ctx)
    assert exports["before"] == 0
    assert exports["after"] == 2
    assert exports["viaNamespace"] == 2
    assert js(ctx, "__celld_main.bump()") == 3
    assert js(ctx, "__celld_main.count") == 3  # re-exported binding stays live
    assert js(ctx, "__celld_main.tryAssign()") == "TypeError"
    assert js(ctx, "__celld_main.tryAssignBinding()") == "TypeError"


def test_import_cycle_behaves_like_esm() -> None:
    ctx, _ = evaluate(FIXTURES / "cycle" / "index.js")
    assert main(ctx)["results"] == {
        "order": ["b", "tdz:ReferenceError", "a"],
        "fromA": "a saw hoisted from a",
        "viaB": "late",
    }


def test_evaluation_order_is_depth_first_post_order() -> None:
    ctx, _ = evaluate(FIXTURES / "order" / "index.js")
    assert main(ctx)["log"] == ["log", "shared", "left", "right", "index"]


def test_resolution_of_index_files_and_extensions() -> None:
    ctx, _ = evaluate(FIXTURES / "resolve" / "index.js")
    assert main(ctx)["results"] == {
        "lib": "lib/index.js",
        "util": "util/index.mjs",
        "bare": "extensionless",
        "mjs": "m.mjs",
        "up": "lib/index.js",
    }


def test_json_and_text_modules() -> None:
    ctx, _ = evaluate(FIXTURES / "data" / "index.js")
    assert main(ctx)["results"] == {
        "config": {"name": "celld", "list": [1, 2, 3], "nested": {"ok": True}},
        "page": "<p>hello</p>\n",
        "notes": "line one\nline two\n",
    }


def test_dynamic_import_of_literal() -> None:
    ctx, bundle = evaluate(FIXTURES / "dynamic" / "index.js")
    assert len(bundle.files) == 2  # later.js is bundled but not evaluated yet
    assert main(ctx)["loaded"] == []
    ctx.eval("__celld_main.load().then((ns) => { globalThis.first = ns; })")
    drain(ctx)
    assert main(ctx)["loaded"] == ["later evaluated", "later", 1]
    ctx.eval("__celld_main.loadTemplate().then((ns) => { globalThis.same = ns === first; })")
    ctx.eval("__celld_main.builtin().then((ns) => { globalThis.env = ns.env; })")
    drain(ctx)
    assert js(ctx, "[same, env]") == [True, {"FROM": "builtin"}]


def test_dynamic_import_of_computed_specifier_rejects_with_its_name() -> None:
    ctx, _ = evaluate(FIXTURES / "dynamic" / "index.js")
    ctx.eval("__celld_main.computed('later.js').catch((e) => { globalThis.failure = e.message; })")
    drain(ctx)
    message = js(ctx, "failure")
    assert '"./later.js"' in message
    assert "dynamic/index.js:9:10" in message


def test_builtin_modules() -> None:
    ctx, _ = evaluate(FIXTURES / "builtins" / "index.js")
    exports = main(ctx)
    assert exports["results"] == {
        "kind": "builtin base",
        "env": {"FROM": "builtin"},
        "same": True,
    }
    assert js(ctx, "__celld_main.Reexported.name") == "WorkflowEntrypoint"


def test_missing_builtin_throws_naming_the_specifier() -> None:
    bundle = bundle_worker(FIXTURES / "builtins" / "index.js")
    ctx = quickjs.Context()
    ctx.eval("globalThis.__celld_builtin_modules = {}")
    with pytest.raises(quickjs.JSException, match="cloudflare:workers"):
        ctx.eval(bundle.source)


def test_missing_builtin_export_is_a_syntax_error() -> None:
    bundle = bundle_worker(FIXTURES / "builtins" / "index.js")
    ctx = quickjs.Context()
    ctx.eval('globalThis.__celld_builtin_modules = {"cloudflare:workers": {env: 1}}')
    with pytest.raises(quickjs.JSException, match="SyntaxError.*WorkflowEntrypoint"):
        ctx.eval(bundle.source)


def test_import_meta_url() -> None:
    ctx, _ = evaluate(FIXTURES / "meta" / "index.js")
    url = (FIXTURES / "meta" / "index.js").resolve().as_uri()
    assert main(ctx) == {"url": url, "nested": url, "proto": None}


def test_imported_names_respect_shadowing() -> None:
    ctx, _ = evaluate(FIXTURES / "shadow" / "index.js")
    assert main(ctx)["results"] == {
        "param": "param",
        "block": "block",
        "outer": "imported",
        "varHoist": "var",
        "catchParam": "caught",
        "destructured": "destructured",
        "defaulted": "defaulted",
        "forOf": "f",
        "classExpr": "value",
        "funcExpr": "function",
        "shorthand": {"value": "imported"},
        "member": "member",
        "key": 1,
        "thisInCall": "undefined this",
        "label": "imported",
    }


def test_modules_are_strict_and_private(tmp_path: Path) -> None:
    ctx, _ = evaluate(
        write(
            tmp_path,
            {
                "index.js": "export const strict = (function () { return this; })() === undefined;"
                "\nconst hidden = 1;\nexport const top = this;\n"
            },
        )
    )
    assert main(ctx) == {"strict": True}
    assert js(ctx, "typeof hidden") == "undefined"


# --------------------------------------------------------------------------- locate


def test_locate_maps_stack_positions_back_to_files(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import { explode } from "./lib/boom.js";\n'
            "export function run() {\n"
            "  return explode();\n"
            "}\n",
            "lib/boom.js": 'import { value } from "../value.js";\n'
            "\n"
            "export function explode() {\n"
            "  if (value) throw new Error('boom');\n"
            "}\n",
            "value.js": "export const value = 1;\n",
        },
    )
    ctx, bundle = evaluate(entry)
    stack = js(ctx, "(() => { try { __celld_main.run(); } catch (e) { return e.stack; } })()")
    frames = [tuple(map(int, m)) for m in re.findall(r"<input>:(\d+):(\d+)", stack)]
    located = [bundle.locate(line, column) for line, column in frames]
    boom = str((tmp_path / "lib" / "boom.js").resolve())
    index = str((tmp_path / "index.js").resolve())
    assert located[0] is not None and located[1] is not None
    assert (Path(located[0][0]).resolve(), located[0][1]) == (Path(boom), 4)
    assert located[0][2] == 24  # `Error`, past the rewritten `value` reference
    assert (Path(located[1][0]).resolve(), located[1][1]) == (Path(index), 3)
    assert located[1][2] in range(10, 18)  # `explode()` despite the rewritten reference
    assert bundle.locate(1, 1) is None


def test_locate_adjusts_columns_after_rewritten_references(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": 'import { a } from "./a.js";\n'
            "export function f() { return a + a + missing; }\n",
            "a.js": "export const a = 1;\n",
        },
    )
    ctx, bundle = evaluate(entry)
    stack = js(ctx, "(() => { try { __celld_main.f(); } catch (e) { return e.stack; } })()")
    line, column = map(int, re.search(r"<input>:(\d+):(\d+)", stack).groups())
    located = bundle.locate(line, column)
    assert located is not None
    assert located[1:] == (2, 38)  # `missing`


# --------------------------------------------------------------------------- errors


def error_of(tmp_path: Path, files: dict[str, str]) -> str:
    entry = write(tmp_path, files)
    with pytest.raises(ModuleError) as info:
        bundle_worker(entry)
    return str(info.value)


def test_syntax_error_names_file_line_column(tmp_path: Path) -> None:
    message = error_of(
        tmp_path,
        {"index.js": 'import "./bad.js";\n', "bad.js": "const ok = 1;\nlet x = ;\n"},
    )
    assert re.match(r".*bad\.js:2:\d+: syntax error", message)


def test_missing_relative_file(tmp_path: Path) -> None:
    message = error_of(tmp_path, {"index.js": 'const a = 1;\nimport { b } from "./nope.js";\n'})
    assert "index.js:2:19: " in message
    assert str((tmp_path / "nope.js").resolve()) in message


@pytest.mark.parametrize(
    ("specifier", "says"),
    [
        ("lodash", "cannot find package 'lodash'"),
        ("node:crypto", 'compatibility_flags = ["nodejs_compat"]'),
        ("/abs/path.js", "cannot find module '/abs/path.js'"),
    ],
)
def test_unresolvable_specifier(tmp_path: Path, specifier: str, says: str) -> None:
    message = error_of(tmp_path, {"index.js": f'import x from "{specifier}";\n'})
    assert "index.js:1:15: " in message
    assert says in message


def test_unknown_cloudflare_builtin(tmp_path: Path) -> None:
    message = error_of(tmp_path, {"index.js": 'import { connect } from "cloudflare:sockets";\n'})
    assert "index.js:1:25: unknown builtin module 'cloudflare:sockets'" in message


def test_dynamic_import_of_bare_literal_fails_at_load(tmp_path: Path) -> None:
    message = error_of(tmp_path, {"index.js": 'export const f = () => import("lodash");\n'})
    assert "index.js:1:31: " in message and "'lodash'" in message


@pytest.mark.parametrize(
    ("source", "position"),
    [
        ("const x = await fetch('x');\n", "1:11"),
        ("\nfor await (const x of y) {}\n", "2:1"),
        ("if (true) { await 1; }\n", "1:13"),
    ],
)
def test_top_level_await_is_rejected(tmp_path: Path, source: str, position: str) -> None:
    message = error_of(tmp_path, {"index.js": source})
    assert f"index.js:{position}: top-level await" in message


def test_await_inside_functions_is_fine(tmp_path: Path) -> None:
    entry = write(tmp_path, {"index.js": "export async function f() { await 1; }\n"})
    bundle_worker(entry)


def test_missing_export(tmp_path: Path) -> None:
    message = error_of(
        tmp_path,
        {"index.js": 'import { nope } from "./a.js";\n', "a.js": "export const yes = 1;\n"},
    )
    assert "index.js:1:10: module './a.js' has no export named 'nope'" in message


def test_missing_reexport(tmp_path: Path) -> None:
    message = error_of(
        tmp_path,
        {"index.js": 'export { nope } from "./a.js";\n', "a.js": "export const yes = 1;\n"},
    )
    assert "index.js:1:10: module './a.js' has no export named 'nope'" in message


def test_export_of_undeclared_name(tmp_path: Path) -> None:
    message = error_of(tmp_path, {"index.js": "export { ghost };\n"})
    assert "index.js:1:10: export 'ghost' is not defined" in message


def test_string_import_names_are_rejected(tmp_path: Path) -> None:
    message = error_of(
        tmp_path,
        {"index.js": 'import { "a b" as c } from "./a.js";\n', "a.js": "export {};\n"},
    )
    assert "index.js:1:10: string import names are not supported" in message


def test_invalid_json_module(tmp_path: Path) -> None:
    message = error_of(
        tmp_path, {"index.js": 'import d from "./d.json";\n', "d.json": '{\n  "a": ,\n}\n'}
    )
    assert "d.json:2:8: invalid JSON" in message


def test_wasm_is_rejected(tmp_path: Path) -> None:
    message = error_of(tmp_path, {"index.js": 'import "./x.wasm";\n', "x.wasm": ""})
    assert "WebAssembly" in message


def test_module_evaluation_error_propagates(tmp_path: Path) -> None:
    entry = write(
        tmp_path, {"index.js": 'import "./a.js";\n', "a.js": "throw new TypeError('x');\n"}
    )
    bundle = bundle_worker(entry)
    with pytest.raises(quickjs.JSException, match="TypeError: x"):
        quickjs.Context().eval(bundle.source)


def test_star_export_of_builtin_and_hashbang(tmp_path: Path) -> None:
    entry = write(
        tmp_path,
        {
            "index.js": '#!/usr/bin/env node\nimport { env } from "./barrel.js";\n'
            'export * from "./barrel.js";\nexport const seen = env;\n',
            "barrel.js": 'export * from "cloudflare:workers";\nexport const own = 1;\n',
        },
    )
    ctx, _ = evaluate(entry)
    assert js(ctx, "Object.keys(__celld_main)") == ["WorkflowEntrypoint", "env", "own", "seen"]
    assert main(ctx)["seen"] == {"FROM": "builtin"}


def test_process_env_node_env_is_defined_as_wrangler_does(tmp_path: Path) -> None:
    """`process.env.NODE_ENV` is "development" (wrangler dev's esbuild `define`), also
    through `globalThis.`; a module's own `process` and assignments are left alone."""
    (tmp_path / "own.js").write_text(
        "const process = { env: { NODE_ENV: 'own' } };\nexport const own = process.env.NODE_ENV;\n"
    )
    (tmp_path / "index.js").write_text(
        'import { own } from "./own.js";\n'
        "export const plain = process.env.NODE_ENV;\n"
        "export const viaGlobal = globalThis.process.env.NODE_ENV;\n"
        "export const choice = process.env.NODE_ENV === 'production' ? 'prod' : 'dev';\n"
        "export { own };\n"
    )
    bundle = bundle_worker(tmp_path / "index.js", root=tmp_path)
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    assert json.loads(ctx.eval("JSON.stringify(__celld_main)")) == {
        "plain": "development",
        "viaGlobal": "development",
        "choice": "dev",
        "own": "own",
    }
