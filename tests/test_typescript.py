"""TypeScript type stripping: positions survive, runtime constructs are refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import quickjs

from celld.isolate.modules import ModuleError, bundle_worker
from celld.isolate.typescript import strip_types

FIXTURES = Path(__file__).parent / "fixtures" / "modules"


def strip(source: str) -> str:
    return strip_types(source, Path("src/x.ts"))


def run_js(source: str):
    return quickjs.Context().eval(source)


def test_fixture_project_runs() -> None:
    bundle = bundle_worker(FIXTURES / "ts" / "index.ts")
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    results = json.loads(ctx.eval("JSON.stringify(__celld_main.results)"))
    assert results == {
        "area": 6,
        "arrow": "s",
        "definite": 5,
        "asserted": 5,
        "value": "x",
        "impl": 1,
        "get": "k",
        "spanning": "function",
        "angle": "angle",
        "afterAs": 5,
        "generic": 1,
        "mts": "mts",
    }
    assert json.loads(ctx.eval("JSON.stringify(Object.keys(__celld_main))")) == [
        "default",
        "results",
    ]
    assert ctx.eval("__celld_main.default.fetch()") == "ok"
    names = [path.name for path in bundle.files]
    # lib/types.ts is imported for a type only, so (as with tsc) it is never loaded
    assert sorted(names) == ["extra.mts", "index.ts", "shapes.ts"]


def test_positions_are_preserved() -> None:
    source = (
        "function f(a: number, b?: string): Promise<\n  number\n> {\n"
        "  return g<string>(a as any)!;\n}\n"
    )
    out = strip(source)
    assert len(out.splitlines()) == len(source.splitlines())
    for before, after in zip(source.splitlines(), out.splitlines(), strict=True):
        assert len(before) == len(after)
    assert out.index("return") == source.index("return")
    assert out.index("(a") == source.index("(a")
    assert "number" not in out and "string" not in out and "?" not in out


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("let a: number = 1; a", 1),
        ("const f = (x?: number): number => x ?? 2; f()", 2),
        ("function g<T>(this: void, v: T): T { return v } g<number>(3)", 3),
        ("let v = (4 as unknown) as number; v", 4),
        ("let w = <number>(5); w", 5),
        ("let s = { n: 6 } satisfies { n: number }; s.n", 6),
        ("let d!: number; d = 7; d", 7),
        ("let m: Map<string, number> | null = new Map<string, number>(); m!.size", 0),
        ("interface I { x: number }\ntype T = I | null;\n8", 8),
        ("declare const q: number;\ndeclare function h(): void;\n9", 9),
        ("function o(a: string): string;\nfunction o(a: any) { return a }\no(10)", 10),
        (
            "abstract class A { abstract m(): void; private readonly x: number = 11;"
            " declare y: string; [k: string]: unknown; }\n"
            "class B extends A implements Object { override m(): void {} public get z(): number"
            " { return this.x } }\nnew B().z",
            11,
        ),
        ("class C { static readonly s?: number = 12; protected p!: number }\nC.s", 12),
        ("namespace Types { export type T = string }\n13", 13),
    ],
)
def test_erasable_syntax_runs(source: str, expected) -> None:
    assert run_js(strip(source)) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("let x: number\n[1].map(String).join()", "1"),
        (
            "class K { get: number\n set(v) {} }\n"
            "Object.getOwnPropertyNames(K.prototype).join() + ',' + Object.keys(new K())",
            "constructor,set,get",
        ),
        ("let a = 'a' as string\nlet b: string = a\nb", "a"),
    ],
)
def test_erasing_a_statement_tail_does_not_join_lines(source: str, expected: str) -> None:
    """Where TypeScript ended a statement by ASI, the blanked tail must not let the next line
    continue it in JavaScript."""
    out = strip(source)
    assert out.count("\n") == source.count("\n")
    assert run_js(out) == expected


def test_erased_statement_keeps_previous_statement_ended() -> None:
    out = strip("let a = 1\ntype T = number\n(function () {})()\n")
    assert run_js(out + "a") == 1


def test_type_only_imports_and_exports_are_erased() -> None:
    out = strip(
        'import type { A } from "./a";\n'
        'import { type B, C, type D } from "./b";\n'
        "export type { A };\n"
        "export { type B, C };\n"
    )
    assert "A" not in out and "B" not in out and "D" not in out
    assert out.splitlines()[1].split() == ["import", "{", "C,", "}", "from", '"./b";']
    assert out.splitlines()[3].split() == ["export", "{", "C", "};"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("let x = 1;\n\nenum Color { Red }\n", "src/x.ts:3:1: TypeScript enum is not supported"),
        ("const enum E { A }\n", "src/x.ts:1:1: TypeScript const enum is not supported"),
        ("namespace N { export const a = 1 }\n", "src/x.ts:1:1: TypeScript namespace"),
        (
            "class P {\n  constructor(private x: number) {}\n}\n",
            "src/x.ts:2:15: TypeScript constructor parameter property",
        ),
        (
            "class P { constructor(readonly x: number) {} }\n",
            "src/x.ts:1:23: TypeScript constructor parameter property",
        ),
        ('import fs = require("fs");\n', "src/x.ts:1:1: TypeScript `import x = require()`"),
        ("import Alias = Some.Thing;\n", "src/x.ts:1:1: TypeScript `import x = ...` alias"),
        ("const x = 1;\nexport = x;\n", "src/x.ts:2:1: TypeScript `export =`"),
        ("@sealed class D {}\n", "src/x.ts:1:1: decorators are not supported"),
    ],
)
def test_unsupported_constructs(source: str, message: str) -> None:
    with pytest.raises(ModuleError) as info:
        strip(source)
    assert str(info.value).startswith(message)
    assert "celld strips types; it does not compile TypeScript" in str(info.value)


def test_tsx_is_rejected() -> None:
    with pytest.raises(ModuleError, match=r"\.tsx files are not supported"):
        strip_types("export {}", Path("app.tsx"))


def test_syntax_error_position() -> None:
    with pytest.raises(ModuleError, match=r"^src/x\.ts:2:\d+: syntax error"):
        strip("let a: number = 1;\nlet b: = ;\n")


def test_errors_in_imported_ts_files_name_that_file(tmp_path: Path) -> None:
    (tmp_path / "index.ts").write_text('import { c } from "./colors.js";\nexport { c };\n')
    (tmp_path / "colors.ts").write_text("export const c = 1;\nexport enum Color { Red }\n")
    with pytest.raises(ModuleError) as info:
        bundle_worker(tmp_path / "index.ts")
    message = str(info.value)
    assert message.endswith(
        "colors.ts:2:8: TypeScript enum is not supported "
        "(celld strips types; it does not compile TypeScript)"
    )


def test_importing_a_type_without_type_keyword(tmp_path: Path) -> None:
    (tmp_path / "types.ts").write_text("export interface Env { A: string }\n")
    (tmp_path / "used.ts").write_text(
        'import { Env } from "./types";\nexport const e: Env = Env;\n'
    )
    (tmp_path / "unused.ts").write_text(
        'import { Env } from "./types";\nexport const f = (e: Env) => e;\n'
    )
    bundle_worker(tmp_path / "unused.ts")  # only used as a type: erased, like tsc does
    with pytest.raises(ModuleError, match="has no export named 'Env' .*`type`"):
        bundle_worker(tmp_path / "used.ts")


def test_locate_in_typescript(tmp_path: Path) -> None:
    (tmp_path / "index.ts").write_text(
        "interface Big {\n  a: number;\n}\n"
        "export function f(x: Big): never {\n"
        "  const y: number = x.a as number; throw new Error('bad');\n"
        "}\n"
    )
    bundle = bundle_worker(tmp_path / "index.ts")
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    stack = ctx.eval("(() => { try { __celld_main.f({a: 1}) } catch (e) { return e.stack } })()")
    line, column = map(int, re.search(r"<input>:(\d+):(\d+)", stack).groups())
    located = bundle.locate(line, column)
    assert located is not None
    assert located[0].endswith("index.ts")
    assert located[1] == 5
    assert located[2] == column  # stripping keeps every column
