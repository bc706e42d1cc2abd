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


def test_decorators_are_kept_for_the_decorator_compiler() -> None:
    out = strip("@sealed<number>() class D { @log m(x: number) {} }\n")
    assert out.startswith("@sealed        () class D { @log m(x        ) {} }")


COMPILED = [
    # (TypeScript, expression evaluated after it, expected JSON)
    (
        "enum Color { Red, Green = 'g', 'Blue-ish' = 4, Dark }",
        "Color",
        {
            "0": "Red",
            "4": "Blue-ish",
            "5": "Dark",
            "Red": 0,
            "Green": "g",
            "Blue-ish": 4,
            "Dark": 5,
        },
    ),
    ("const enum K { A = 1 << 2, B = A | 1, C }", "[K.A, K.B, K.C, K[5]]", [4, 5, 6, "B"]),
    ("enum E { A = 'a' }\nenum E2 { X = E.A.length }", "[E.A, E2.X]", ["a", 1]),
    (
        "class P {\n  constructor(private x: number, public readonly y = 2, z?: number) {}\n"
        "  sum() { return this.x + this.y; }\n}",
        "[new P(1).sum(), Object.keys(new P(1, 5))]",
        [3, ["x", "y"]],
    ),
    (
        "class A { constructor(public a: number) {} }\n"
        "class B extends A { constructor(protected override a: number, public b: string) "
        "{ super(a * 2); } }",
        "[new B(1, 'q').a, new B(1, 'q').b]",
        [1, "q"],
    ),
    (
        "namespace N { export const a = 1; export function f(): number { return a + k; }"
        " const k = 2; export namespace M { export let deep = k * 10; } }",
        "[N.a, N.f(), N.M.deep, Object.keys(N)]",
        [1, 3, 20, ["a", "f", "M"]],
    ),
    ("namespace N { export const a = 1 }\nimport Alias = N;", "Alias.a", 1),
    (
        "class C { accessor v = 3; }\nconst c = new C(); c.v = c.v + 1;",
        "[c.v, 'v' in c]",
        [4, True],
    ),
    (
        "abstract class S { abstract f(): void; declare g: number; h!: string; }\n"
        "class T extends S { override f() {} }",
        "Object.keys(new T())",
        ["h"],
    ),
    ("const v = { a: 1 } satisfies Record<string, number>;", "v.a", 1),
]


@pytest.mark.parametrize(("source", "expression", "expected"), COMPILED)
def test_runtime_constructs_are_compiled(source: str, expression: str, expected) -> None:
    out = strip(source + "\n")
    assert out.count("\n") == source.count("\n") + 1  # lines never move
    assert json.loads(run_js(f"{out};JSON.stringify({expression})")) == expected


def test_import_require_and_export_equals(tmp_path: Path) -> None:
    (tmp_path / "index.ts").write_text(
        'import helper = require("./helper");\nexport default { value: helper.double(21) };\n'
    )
    (tmp_path / "helper.ts").write_text(
        "function double(x: number): number { return x * 2; }\nexport = { double };\n"
    )
    bundle = bundle_worker(tmp_path / "index.ts")
    ctx = quickjs.Context()
    ctx.eval(bundle.source)
    assert ctx.eval("__celld_main.default.value") == 42


def test_syntax_error_position() -> None:
    with pytest.raises(ModuleError, match=r"^src/x\.ts:2:\d+: syntax error"):
        strip("let a: number = 1;\nlet b: = ;\n")


def test_errors_in_imported_ts_files_name_that_file(tmp_path: Path) -> None:
    (tmp_path / "index.ts").write_text('import { c } from "./colors.js";\nexport { c };\n')
    (tmp_path / "colors.ts").write_text("export const c = 1;\nclass Color { @dec #x = 1 }\n")
    with pytest.raises(ModuleError) as info:
        bundle_worker(tmp_path / "index.ts")
    message = str(info.value)
    assert message.endswith(
        "colors.ts:2:15: decorators on private members (or `accessor` fields) are not "
        "supported by celld"
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
