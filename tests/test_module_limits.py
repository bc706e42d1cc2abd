"""Big module graphs load; a module too big to load is refused with a clear error; the
bundled graph is cached by the contents of its inputs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import quickjs

from celld.isolate import modules
from celld.isolate.modules import ModuleError, bundle_worker
from celld.isolate.program import build_program
from celld.isolate.threads import JS_STACK_LIMIT_BYTES, THREAD_STACK_BYTES


def evaluate(entry: Path) -> quickjs.Context:
    bundle = bundle_worker(entry, root=entry.parent)
    ctx = quickjs.Context()
    ctx.eval("globalThis.__celld_builtin_modules = {};")
    ctx.eval(bundle.source)
    return ctx


def on_js_thread(entry: Path, expression: str):
    """Evaluate on a thread sized like celld's JS threads, with their stack limit."""
    result: list = []

    def work() -> None:
        bundle = bundle_worker(entry, root=entry.parent)
        ctx = quickjs.Context()
        ctx.set_max_stack_size(JS_STACK_LIMIT_BYTES)
        ctx.eval("globalThis.__celld_builtin_modules = {};")
        ctx.eval(bundle.source)
        result.append(ctx.eval(expression))

    old = threading.stack_size(THREAD_STACK_BYTES)
    try:
        thread = threading.Thread(target=work)
        thread.start()
    finally:
        threading.stack_size(old)
    thread.join()
    return result[0]


def test_long_import_chain_loads(tmp_path: Path) -> None:
    count = 3000
    for i in range(count - 1):
        (tmp_path / f"m{i}.js").write_text(
            f'import {{ total as n }} from "./m{i + 1}.js";\nexport const total = n + 1;\n'
        )
    (tmp_path / f"m{count - 1}.js").write_text("export const total = 0;\n")
    ctx = evaluate(tmp_path / "m0.js")
    assert ctx.eval("__celld_main.total") == count - 1


def test_long_export_star_chain_and_cycle_ring(tmp_path: Path) -> None:
    # every namespace along a star chain holds every name below it (n²/2 getters in all)
    count = 400
    for i in range(count - 1):
        (tmp_path / f"s{i}.js").write_text(
            f'export * from "./s{i + 1}.js";\nexport const v{i} = {i};\n'
        )
    (tmp_path / f"s{count - 1}.js").write_text("export const last = 'end';\n")
    ctx = evaluate(tmp_path / "s0.js")
    assert ctx.eval("__celld_main.last") == "end"
    assert ctx.eval("Object.keys(__celld_main).length") == count
    # a ring of imports: every module imports the next and the last imports the first;
    # a cycle is entered recursively (as ESM evaluates one), so its length is bounded by
    # the JavaScript stack, unlike chains
    count = 300
    ring = tmp_path / "ring"
    ring.mkdir()
    for i in range(count):
        (ring / f"r{i}.js").write_text(
            f'import {{ f{(i + 1) % count} }} from "./r{(i + 1) % count}.js";\n'
            f"export function f{i}(n) {{ return n === 0 ? {i} : f{(i + 1) % count}(n - 1); }}\n"
            f"export const at{i} = {i};\n"
        )
    assert on_js_thread(ring / "r0.js", "__celld_main.f0(5)") == 5


def test_long_require_chain_loads(tmp_path: Path) -> None:
    # require() runs nested, as in Node, so its depth is bounded by the JavaScript stack
    count = 600
    for i in range(count - 1):
        (tmp_path / f"c{i}.cjs").write_text(f"module.exports = require('./c{i + 1}.cjs') + 1;\n")
    (tmp_path / f"c{count - 1}.cjs").write_text("module.exports = 0;\n")
    (tmp_path / "index.js").write_text('import v from "./c0.cjs";\nexport const value = v;\n')
    assert on_js_thread(tmp_path / "index.js", "__celld_main.value") == count - 1


def test_huge_module_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modules, "MAX_MODULE_BYTES", 1000)
    (tmp_path / "index.js").write_text('import "./big.js";\n')
    (tmp_path / "big.js").write_text("// " + "x" * 2000 + "\n")
    with pytest.raises(ModuleError, match=r"big\.js: module is 2,004 bytes; celld refuses"):
        bundle_worker(tmp_path / "index.js")


def test_whole_program_size_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modules, "MAX_BUNDLE_BYTES", 5000)
    for i in range(10):
        (tmp_path / f"p{i}.js").write_text(f'import "./p{i + 1}.js";\n// ' + "y" * 900 + "\n")
    (tmp_path / "p10.js").write_text("")
    with pytest.raises(ModuleError, match="exceed 0 MiB together"):
        bundle_worker(tmp_path / "p0.js")


def test_bundle_cache_follows_file_contents(tmp_path: Path) -> None:
    project = tmp_path / "project"
    cache = tmp_path / "cache"
    (project / "src").mkdir(parents=True)
    (project / "src" / "index.js").write_text('import { v } from "./v";\nexport { v };\n')
    (project / "src" / "v.js").write_text("export const v = 1;\n")

    def value() -> int:
        program = build_program(project / "src" / "index.js", root=project, cache_dir=cache)
        ctx = quickjs.Context()
        ctx.eval(program.script.source)
        return ctx.eval("__celld_main.v")

    assert value() == 1
    entries = list(cache.glob("bundle-*.json"))
    assert len(entries) == 1
    stored = json.loads(entries[0].read_text())
    assert any(key.endswith("v.js") for key in stored["inputs"])
    # a cached bundle is used as is: prove it by editing the cache itself
    stored["bundle"]["source"] = stored["bundle"]["source"].replace("const v = 1", "const v = 7")
    entries[0].write_text(json.dumps(stored))
    assert value() == 7
    # any change of an input's contents rebuilds
    (project / "src" / "v.js").write_text("export const v = 2;\n")
    assert value() == 2
    # so does a new file next to a module: "./v" now finds v.ts first
    (project / "src" / "v.ts").write_text("export const v: number = 3;\n")
    assert value() == 3
