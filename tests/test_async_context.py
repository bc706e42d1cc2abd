"""AsyncLocalStorage across `await` (celld/isolate/async_context.py, js/node/async_hooks.js):
the bundler's rewrite of every await in a Worker importing node:async_hooks, run in a real
isolate."""

from __future__ import annotations

import re
from pathlib import Path

from celld.isolate.async_context import await_splices
from celld.isolate.program import build_program
from celld.isolate.runtime import Script, node_scripts
from tests.jsharness import run_js

PROJECT = Path(__file__).resolve().parent / "projects" / "async-context"


def test_stores_follow_awaits_timers_and_callbacks(tmp_path: Path) -> None:
    program = build_program(
        PROJECT / "src" / "index.js", root=PROJECT, compatibility_flags=("nodejs_compat",)
    )
    assert program.bundle is not None
    assert "node:async_hooks" in program.bundle.builtins
    scripts = (
        *node_scripts(frozenset(program.bundle.builtins)),
        Script("bundle", program.bundle.source),
    )
    result = run_js("return await __celld_main.run();", extra=scripts)
    assert result["seen"] == [
        ["sync", "A"],
        ["after await", "A"],
        ["nested", "A"],
        ["timer", "A"],
        ["then", "A"],
        ["microtask", "A"],
        ["catch", "A", "x"],
        ["two stores", "A", "B"],
        ["back", "A", None],
        ["outside", None],
    ]
    # Three runs whose awaits interleave each keep their own store.
    assert result["interleaved"] == [[1] * 6, [2] * 6, [3] * 6]
    assert (result["fromResource"], result["fromSnapshot"]) == ("R", "S")
    assert result["cjs"] == "cjs"
    assert result["typed"] == ["ts", "ts"]
    # Lines never move: the error still points at typed.ts line 9 (the bundle was
    # evaluated as a script of its own, so its positions are the bundle's).
    located = [
        program.bundle.locate(int(line), int(column))
        for line, column in re.findall(r"<input>:(\d+):(\d+)", result["stack"])
    ]
    assert any(where and where[0].endswith("typed.ts") and where[1] == 9 for where in located), (
        result["stack"],
        located,
    )


def test_awaits_are_left_alone_without_async_hooks(tmp_path: Path) -> None:
    entry = tmp_path / "index.js"
    entry.write_text("export async function f(p) { return await p; }\n")
    plain = build_program(entry, root=tmp_path, compatibility_flags=("nodejs_compat",))
    assert plain.bundle is not None and "__celld_ar" not in plain.bundle.source
    entry.write_text(
        'import { AsyncLocalStorage } from "node:async_hooks";\n'
        "export const als = new AsyncLocalStorage();\n"
        "export async function f(p) { return await p; }\n"
    )
    tracked = build_program(entry, root=tmp_path, compatibility_flags=("nodejs_compat",))
    assert tracked.bundle is not None
    assert "return __celld_ar(__celld_ac(), await __celld_as(p));" in tracked.bundle.source


def test_nested_awaits_and_replaced_stretches() -> None:
    # `await await x`: the inner await is the outer one's operand.
    source = b"await await x"
    splices = await_splices([(0, 6, 13), (6, 12, 13)], [])
    from celld.isolate.modules import _apply_splices

    text, _ = _apply_splices(source, splices)
    assert text == (
        "__celld_ar(__celld_ac(), await __celld_as(__celld_ar(__celld_ac(), await __celld_as(x))))"
    )
    # An await inside a stretch another splice replaces is left as it is.
    assert await_splices([(10, 16, 17)], [(5, 20, "replaced")]) == []
    # A replacement inside the operand (an imported name) does not stop the rewrite.
    assert len(await_splices([(0, 6, 9)], [(6, 9, "ns.foo")])) == 3
