"""Generated-input tests of the module loader, the resolver and the TypeScript stripper.

Each property says: a clear `ModuleError`/`ResolveError` or a correct result, never another
exception, a crash or a hang. Example counts are kept small so CI stays quick; hypothesis
shrinks any failure to a minimal input.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import quickjs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from celld.isolate.modules import ModuleError, bundle_worker
from celld.isolate.resolver import ResolveError, Resolver
from celld.isolate.typescript import strip_types

FUZZ = settings(
    max_examples=int(os.environ.get("CELLD_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# --------------------------------------------------------------------------- TypeScript

CORPUS = [
    "enum Color { Red, Green = 'g', Blue = 4 }\n",
    "const enum K { A = 1 << 2, B = A | 1 }\n",
    "class P { constructor(private x: number, public y = 2) { } }\n",
    "class D extends P { constructor(readonly z: string) { super(1); } }\n",
    "namespace N { export const a = 1; export function f(): number { return a; } }\n",
    "import x = require('y');\nexport = x;\n",
    "import type { A } from './a';\nimport { type B, C } from './b';\n",
    "let v = <T,>(a: T): T => a;\nconst w = v<number>(1)!;\n",
    "abstract class S { abstract f(): void; declare g: number; h!: string; accessor q = 1; }\n",
    "const o = { a: 1 } satisfies Record<string, number> as const;\n",
    "function g(this: Window, a?: string, ...rest: number[]): asserts a is string {}\n",
    "interface I { a: string }\ntype T = I | { b: number };\nexport type { T };\n",
    "declare module 'x' { export const y: number; }\ndeclare global { var z: string }\n",
    "export default class extends Base<T> implements I { m(): void {} }\n",
]
TOKENS = [
    "enum", "const", "namespace", "module", "declare", "export", "import", "type", "class",
    "constructor", "private", "public", "readonly", "abstract", "override", "accessor", "as",
    "satisfies", "require", "=", "(", ")", "{", "}", "<", ">", ":", ";", ",", "?", "!", ".",
    "=>", "'s'", "1", "x", "y", "T", "number", "string", "\n", " ", "/*", "*/", "//", "`",
    "@", "#", "...", "|", "&", "[", "]",
]  # fmt: skip


def check_strip(source: str) -> None:
    try:
        out = strip_types(source, Path("fuzz.ts"))
    except ModuleError as error:
        assert str(error).startswith("fuzz.ts")
        return
    assert out.count("\n") == source.count("\n")  # lines never move


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map(" ".join))
def test_strip_types_on_token_soup(source: str) -> None:
    check_strip(source)


@FUZZ
@given(
    st.sampled_from(CORPUS),
    st.integers(0, 200),
    st.integers(0, 40),
    st.sampled_from(["", "(", "}", "enum ", "<T>", ": number", "\n", "export ", "!", "'"]),
)
def test_strip_types_on_mutated_corpus(source: str, at: int, cut: int, insert: str) -> None:
    at = min(at, len(source))
    check_strip(source[:at] + insert + source[at + cut :])


@FUZZ
@given(st.text(max_size=200))
def test_strip_types_on_any_text(source: str) -> None:
    check_strip(source)


# --------------------------------------------------------------------------- module graphs

graphs = st.integers(2, 7).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.lists(st.integers(0, n - 1), max_size=3), min_size=n, max_size=n),
        st.lists(st.sampled_from(["esm", "cjs", "ts"]), min_size=n, max_size=n),
    )
)


def module_source(i: int, deps: list[int], kind: str, kinds: list[str]) -> str:
    def spec(j: int) -> str:
        return f"./m{j}" + (".cjs" if kinds[j] == "cjs" else "")

    listed = ", ".join(f"v{j}" for j in deps)
    if kind == "cjs":
        reads = ", ".join(f"require({json.dumps(spec(j))}).v{j}" for j in deps)
        return f"exports.v{i} = {i};\nexports.all{i} = () => [exports.v{i}, {reads}];\n"
    imports = "".join(
        f"import {{ v{j} as d{k} }} from {json.dumps(spec(j))};\n" for k, j in enumerate(deps)
    )
    reads = ", ".join(f"d{k}" for k in range(len(deps)))
    typed = ": number" if kind == "ts" else ""
    del listed
    body = f"export function all{i}() {{ return [v{i}, {reads}]; }}\n"
    return imports + f"export const v{i}{typed} = {i};\n" + body


@FUZZ
@given(graphs)
def test_generated_graphs_load_and_link_correctly(graph: tuple[int, list[list[int]], list[str]]):
    n, deps, kinds = graph
    kinds[0] = "esm"
    root = Path(tempfile.mkdtemp(prefix="celld-fuzz-"))
    try:
        suffix = {"esm": ".js", "ts": ".ts", "cjs": ".cjs"}
        for i in range(n):
            (root / f"m{i}{suffix[kinds[i]]}").write_text(
                module_source(i, deps[i], kinds[i], kinds)
            )
        entry_imports = "".join(
            f'import * as n{j} from "./m{j}{".cjs" if kinds[j] == "cjs" else ""}";\n'
            for j in range(1, n)
        )
        calls = ", ".join(["all0()"] + [f"n{j}.all{j}()" for j in range(1, n)])
        (root / "m0.js").write_text(
            entry_imports + module_source(0, deps[0], "esm", kinds)
            + f"export const result = () => JSON.stringify([{calls}]);\n"
        )  # fmt: skip
        bundle = bundle_worker(root / "m0.js", root=root)
        ctx = quickjs.Context()
        ctx.set_time_limit(5)
        ctx.eval("globalThis.__celld_builtin_modules = {};")
        ctx.eval(bundle.source)
        expected = [[i, *deps[i]] for i in range(n)]
        assert json.loads(ctx.eval("__celld_main.result()")) == expected
    finally:
        shutil.rmtree(root, ignore_errors=True)


STATEMENTS = [
    'import { a } from "./b.js";',
    'import * as ns from "./b.js";',
    'import def from "./c.cjs";',
    'export * from "./b.js";',
    'export { a as z } from "./b.js";',
    'export { nope } from "./b.js";',
    'import "./missing.js";',
    'import x from "pkg";',
    'import "node:fs";',
    "export const a = 1;",
    "export default function () {}",
    "export default 1;",
    "const q = require('./c.cjs');",
    "await 1;",
    "return 1;",
    'const d = import("./b.js");',
    "import.meta.url;",
    "export { a };",
    "let a = 2;",
    "}",
    "@dec class K {}",
    "module.exports = 3;",
]


@FUZZ
@given(
    st.lists(st.sampled_from(STATEMENTS), max_size=6),
    st.lists(st.sampled_from(STATEMENTS), max_size=6),
    st.lists(st.sampled_from(STATEMENTS), max_size=4),
)
def test_random_statements_load_or_fail_clearly(a: list[str], b: list[str], c: list[str]):
    root = Path(tempfile.mkdtemp(prefix="celld-fuzz-"))
    try:
        (root / "a.js").write_text("\n".join(a) + "\n")
        (root / "b.js").write_text("\n".join(b) + "\n")
        (root / "c.cjs").write_text("\n".join(c) + "\n")
        try:
            bundle = bundle_worker(root / "a.js", root=root)
        except ModuleError as error:
            assert str(error)  # a message, positioned where a position is known
            return
        ctx = quickjs.Context()
        ctx.set_time_limit(5)
        ctx.eval("globalThis.__celld_builtin_modules = {};")
        # a JavaScript error at run time (e.g. a TDZ read) is the module's own
        with contextlib.suppress(quickjs.JSException):
            ctx.eval(bundle.source)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- package.json

json_values = st.recursive(
    st.none() | st.sampled_from(["./a.js", "./b/*.js", "./c.js", "x", "../up.js", "./*"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    ".",
                    "./sub",
                    "./p/*",
                    "import",
                    "require",
                    "workerd",
                    "default",
                    "node",
                    "types",
                    "./a/",
                    "#x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),  # fmt: skip
    max_leaves=10,
)


@FUZZ
@given(
    json_values,
    st.sampled_from(["pkg", "pkg/sub", "pkg/p/q", "pkg/a/c.js", "#x", "pkg/../x"]),
    st.sampled_from(["import", "require"]),
)
def test_resolver_on_generated_exports_maps(exports, spec: str, kind: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="celld-fuzz-"))
    try:
        package = root / "node_modules" / "pkg"
        (package / "b").mkdir(parents=True)
        for name in ("a.js", "c.js", "b/q.js", "p/q.js"):
            (package / name).parent.mkdir(parents=True, exist_ok=True)
            (package / name).write_text("")
        (package / "package.json").write_text(json.dumps({"exports": exports, "imports": exports}))
        importer = package / "a.js" if spec.startswith("#") else root / "index.js"
        try:
            found = Resolver().resolve(spec, importer, kind)
        except ResolveError as error:
            assert str(error)
            return
        assert found.is_file()
    finally:
        shutil.rmtree(root, ignore_errors=True)
