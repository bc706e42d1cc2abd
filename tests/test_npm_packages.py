"""Popular npm packages a Worker pulls in (tests/projects/npm-packages, installed with
`npm ci`), bundled by celld and run in a real isolate: ESM-only, CommonJS-only and dual
packages, `exports` maps with conditions, deep `export *` fan-outs (date-fns, lodash-es)
and a graph of over a thousand files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from celld.isolate.program import build_program
from celld.isolate.runtime import Script, node_scripts
from compat.targets import ensure_node_modules
from tests.jsharness import run_js

PROJECT = Path(__file__).resolve().parent / "projects" / "npm-packages"


def test_popular_packages_load_and_work(tmp_path: Path) -> None:
    if shutil.which("npm") is None and not (PROJECT / "node_modules").is_dir():
        pytest.skip("npm is not installed; `npm ci` in tests/projects/npm-packages first")
    ensure_node_modules(PROJECT)
    program = build_program(
        PROJECT / "src" / "index.ts",
        root=PROJECT,
        compatibility_flags=("nodejs_compat",),
        cache_dir=tmp_path / "cache",
    )
    assert program.bundle is not None
    assert len(program.bundle.files) > 1000
    bundle = Script("bundle", program.bundle.source)
    result = run_js("return await __celld_main.run();", extra=(*node_scripts(), bundle))
    assert result == {
        "jwt": "ada",
        "date": "1970-01-02",
        "uuid": True,
        "chunk": [[1, 2], [3]],
        "lodash": "helloWorld",
        "hono": {"a": 1},
        "valibot": False,
        "superjson": '{"json":{"d":"1970-01-01T00:00:00.000Z"},'
        '"meta":{"values":{"d":["Date"]},"v":1}}',
        "dayjs": "1970-01-02T00:00:00.000Z",
        "qs": {"a": {"b": "1"}},
        "drizzle": "function",
    }
