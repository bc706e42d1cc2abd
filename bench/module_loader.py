"""What QuickJS's own module system would cost against celld's rewriter (DECISIONS.md).

For one project: the rewriter's bundling time (cold, no cache) and the time to compile its
one script; then every ES module file of the same graph compiled by QuickJS as a module
(JS_Eval with JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY, through the binding's
library), and how many of the graph's files QuickJS could take as they are. Run:
`python bench/module_loader.py examples/tokens/src/index.ts`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import quickjs

from celld.isolate import layout, native
from celld.isolate.modules import build_bundle

_MODULE, _COMPILE_ONLY = 1 << 0, 1 << 5
_SCRIPT = 0


def _compile(lib: native._Library, context: int, text: bytes, flags: int) -> bool:
    value = lib.eval(context, text, len(text), b"<bench>", flags | _COMPILE_ONLY)
    if value.tag == native.EXPECTED.tags.exception:
        lib.free_value(context, lib.get_exception(context))
        return False
    lib.free_value(context, value)
    return True


def main(entry: Path) -> None:
    started = time.perf_counter()
    from celld.isolate.program import node_builtins

    builtins = {"cloudflare:workers", "cloudflare:workflows"} | node_builtins()
    bundle = build_bundle(entry, builtins=builtins, root=entry.parent.parent, nodejs_compat=True)[0]
    bundled = time.perf_counter() - started
    lib = native.library()
    ctx = quickjs.Context()
    pointers = layout.direct_pointers(ctx)
    assert lib is not None and pointers is not None, "the direct path is not available here"
    context = pointers[1]
    source = bundle.source.encode()
    started = time.perf_counter()
    assert _compile(lib, context, source, _SCRIPT)
    script_compile = time.perf_counter() - started
    as_modules = failed = 0
    started = time.perf_counter()
    for path in bundle.files:
        if path.suffix not in (".js", ".mjs"):
            failed += 1
            continue
        if _compile(lib, context, path.read_bytes(), _MODULE):
            as_modules += 1
        else:
            failed += 1
    module_compile = time.perf_counter() - started
    print(f"files in the graph: {len(bundle.files)}; bundle {len(source) / 1024:.0f} KiB")
    compiled = script_compile * 1000
    print(f"rewriter: bundle {bundled * 1000:.0f} ms (cold), compile {compiled:.1f} ms")
    print(
        f"QuickJS modules: {as_modules} files compiled as modules in "
        f"{module_compile * 1000:.1f} ms; {failed} it could not take as they are "
        "(TypeScript, CommonJS, JSON, or not ES module syntax)"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
