"""The resolver's rules, each checked against a small package written into a temp folder.

The packages are written by the tests (not committed) so `node_modules/` folders need no
exception in .gitignore; every `exports` form gets its own package.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from celld.isolate.resolver import ResolveError, Resolver, match_map, split_package


def tree(root: Path, files: dict[str, str | dict]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content) if isinstance(content, dict) else content)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    nm = "node_modules/"
    return tree(
        tmp_path,
        {
            "src/index.ts": "",
            # exports as a plain string
            nm + "plain/package.json": {"name": "plain", "exports": "./lib/main.js"},
            nm + "plain/lib/main.js": "",
            # conditions in key order; workerd beats node, import beats require
            nm + "cond/package.json": {
                "name": "cond",
                "exports": {
                    ".": {
                        "types": "./index.d.ts",
                        "node": "./node.js",
                        "workerd": "./workerd.js",
                        "import": "./esm.js",
                        "default": "./default.js",
                    },
                    "./feature": {"require": "./feature.cjs", "import": "./feature.mjs"},
                    "./nested": {"browser": {"import": "./nb.mjs", "default": "./nb.js"}},
                    "./array": [{"node": "./no.js"}, "./yes.js"],
                    "./excluded": None,
                    "./package.json": "./package.json",
                },
            },
            **{
                nm + f"cond/{f}": ""
                for f in (
                    [
                        "node.js",
                        "workerd.js",
                        "esm.js",
                        "default.js",
                        "feature.cjs",
                        "feature.mjs",
                        "nb.mjs",
                        "nb.js",
                        "yes.js",
                        "no.js",
                    ]
                )
            },
            # sugar: the whole exports value is the "." entry's conditions
            nm + "sugar/package.json": {"exports": {"import": "./a.mjs", "default": "./a.js"}},
            nm + "sugar/a.mjs": "",
            # subpath patterns, most specific wins
            nm + "pat/package.json": {
                "exports": {
                    "./*": "./dist/*.js",
                    "./utils/*": "./dist/utils/*.mjs",
                    "./internal/*": None,
                }
            },
            nm + "pat/dist/x.js": "",
            nm + "pat/dist/utils/y.mjs": "",
            # no exports: module, then main, then index
            nm + "legacy/package.json": {"module": "./esm/index.js", "main": "./cjs/index.js"},
            nm + "legacy/esm/index.js": "",
            nm + "legacy/cjs/index.js": "",
            nm + "legacy/sub/file.js": "",
            nm + "legacy/dir/index.js": "",
            nm + "mainonly/package.json": {"main": "lib"},
            nm + "mainonly/lib/index.js": "",
            nm + "bare/index.js": "",
            # scoped package
            nm + "@scope/pkg/package.json": {"exports": {".": "./s.js", "./more": "./m.js"}},
            nm + "@scope/pkg/s.js": "",
            nm + "@scope/pkg/m.js": "",
            # a package with an imports map that imports itself by name
            nm + "self/package.json": {
                "name": "self",
                "exports": {".": "./main.js", "./extra": "./extra.js"},
                "imports": {
                    "#dep": {"workerd": "./dep-workerd.js", "default": "./dep.js"},
                    "#ext/*": "./ext/*.js",
                    "#other": "plain",
                },
            },
            nm + "self/main.js": "",
            nm + "self/extra.js": "",
            nm + "self/dep-workerd.js": "",
            nm + "self/ext/z.js": "",
        },
    )


def resolve(project: Path, spec: str, kind: str = "import", importer: str = "src/index.ts"):
    return Resolver().resolve(spec, project / importer, kind).relative_to(project.resolve())


@pytest.mark.parametrize(
    ("spec", "kind", "expected"),
    [
        ("plain", "import", "node_modules/plain/lib/main.js"),
        ("cond", "import", "node_modules/cond/workerd.js"),
        ("cond/feature", "import", "node_modules/cond/feature.mjs"),
        ("cond/feature", "require", "node_modules/cond/feature.cjs"),
        ("cond/nested", "import", "node_modules/cond/nb.mjs"),
        ("cond/nested", "require", "node_modules/cond/nb.js"),
        ("cond/array", "import", "node_modules/cond/yes.js"),
        ("cond/package.json", "import", "node_modules/cond/package.json"),
        ("sugar", "import", "node_modules/sugar/a.mjs"),
        ("pat/x", "import", "node_modules/pat/dist/x.js"),
        ("pat/utils/y", "import", "node_modules/pat/dist/utils/y.mjs"),
        ("legacy", "import", "node_modules/legacy/esm/index.js"),
        ("legacy/sub/file", "import", "node_modules/legacy/sub/file.js"),
        ("legacy/dir", "import", "node_modules/legacy/dir/index.js"),
        ("mainonly", "import", "node_modules/mainonly/lib/index.js"),
        ("bare", "import", "node_modules/bare/index.js"),
        ("@scope/pkg", "import", "node_modules/@scope/pkg/s.js"),
        ("@scope/pkg/more", "import", "node_modules/@scope/pkg/m.js"),
    ],
)
def test_package_resolution(project: Path, spec: str, kind: str, expected: str) -> None:
    assert str(resolve(project, spec, kind)) == expected


def test_imports_map_and_self_reference(project: Path) -> None:
    inside = "node_modules/self/main.js"
    assert str(resolve(project, "#dep", importer=inside)) == "node_modules/self/dep-workerd.js"
    assert str(resolve(project, "#ext/z", importer=inside)) == "node_modules/self/ext/z.js"
    assert str(resolve(project, "#other", importer=inside)) == "node_modules/plain/lib/main.js"
    assert str(resolve(project, "self/extra", importer=inside)) == "node_modules/self/extra.js"


def test_parent_node_modules(project: Path) -> None:
    tree(project, {"src/deep/er/mod.ts": ""})
    found = resolve(project, "plain", importer="src/deep/er/mod.ts")
    assert str(found) == "node_modules/plain/lib/main.js"


def test_nested_node_modules_win(project: Path) -> None:
    tree(
        project,
        {
            "node_modules/outer/package.json": {"main": "i.js"},
            "node_modules/outer/i.js": "",
            "node_modules/outer/node_modules/plain/package.json": {"exports": "./own.js"},
            "node_modules/outer/node_modules/plain/own.js": "",
        },
    )
    found = resolve(project, "plain", importer="node_modules/outer/i.js")
    assert str(found) == "node_modules/outer/node_modules/plain/own.js"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("cond/excluded", "is not exported"),
        ("cond/missing", "is not exported"),
        ("pat/internal/q", "is not exported"),
        ("nothere", "cannot find package 'nothere'"),
        ("#dep", "no package.json `imports` map applies"),
        ("@scope", "invalid package specifier"),
    ],
)
def test_resolution_errors(project: Path, spec: str, says: str) -> None:
    with pytest.raises(ResolveError, match=says):
        resolve(project, spec)


def test_relative_probing(tmp_path: Path) -> None:
    tree(tmp_path, {"a.ts": "", "b/index.ts": "", "c.js": "", "c.ts": "", "d.mjs": ""})
    importer = tmp_path / "main.ts"
    r = Resolver()
    assert r.resolve("./a", importer).name == "a.ts"
    assert r.resolve("./a.js", importer).name == "a.ts"  # TypeScript-style .js -> .ts
    assert r.resolve("./b", importer).relative_to(tmp_path.resolve()) == Path("b/index.ts")
    assert r.resolve("./c.js", importer).name == "c.js"  # the file itself first
    assert r.resolve("./d", importer).name == "d.mjs"


def test_split_and_match() -> None:
    assert split_package("@a/b/c/d") == ("@a/b", "./c/d")
    assert split_package("x") == ("x", ".")
    assert split_package("@a") == (None, ".")
    conditions = frozenset({"import", "default"})
    assert match_map({"./a/*.js": "./x/*.js"}, "./a/b/c.js", conditions) == "./x/b/c.js"
    assert match_map({"./a/": "./lib/"}, "./a/q.js", conditions) == "./lib/q.js"
