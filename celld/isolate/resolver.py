"""Finding the file an import or require specifier names, as wrangler's bundler does.

Relative specifiers resolve against the importing file (with the extension and `index`
fallbacks TypeScript-era projects rely on); bare specifiers resolve from `node_modules`
folders of the importer and its parents, following each package's `package.json`:
`exports` (subpaths, patterns and conditions), then `module`, then `main`. `#name`
specifiers use the importing package's `imports` map.

The active conditions are the ones wrangler passes to esbuild for Workers (`workerd`,
`worker`, `browser`) plus `import` or `require` by kind of request, `module` and `default`.
As in Node, an `exports` object is read in its own key order and the first key that is an
active condition wins.

celld implements this itself rather than through a library: the Python packages that do
Node resolution implement Node's own condition set and file probing, not esbuild's.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")
#: Extensions tried for an extensionless specifier, in esbuild's order for Workers.
PROBE_SUFFIXES = (".tsx", ".ts", ".mts", ".jsx", ".js", ".mjs", ".cjs", ".cts", ".json")
BASE_CONDITIONS = ("workerd", "worker", "browser")


class ResolveError(Exception):
    """A specifier names nothing that exists (the message says what was tried)."""


@dataclass
class PackageInfo:
    """The parts of one package.json the resolver and loader read."""

    path: Path  # the package.json file
    data: dict[str, Any]

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def type(self) -> str:
        kind = self.data.get("type")
        return kind if isinstance(kind, str) else "commonjs"


@dataclass
class Resolver:
    """Resolves specifiers to files; remembers every package.json it read."""

    packages: dict[Path, PackageInfo | None] = field(default_factory=dict)

    # ---- package.json

    def package_at(self, folder: Path) -> PackageInfo | None:
        """The package.json directly in `folder`, or None (cached, errors raise)."""
        if folder in self.packages:
            return self.packages[folder]
        path = folder / "package.json"
        info = None
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise ResolveError(f"cannot read {path}: {error}") from error
            if not isinstance(data, dict):
                raise ResolveError(f"{path}: package.json must hold a JSON object")
            info = PackageInfo(path, data)
        self.packages[folder] = info
        return info

    def package_of(self, file: Path) -> PackageInfo | None:
        """The nearest package.json above `file` (what decides `type` and `imports`)."""
        for folder in file.parents:
            info = self.package_at(folder)
            if info is not None:
                return info
            if folder.name == "node_modules":
                return None
        return None

    # ---- entry points

    def resolve(self, spec: str, importer: Path, kind: str = "import") -> Path:
        """The file `spec` names when imported (`kind` "import") or required from `importer`."""
        if spec.startswith(("./", "../", "/")) or spec in (".", ".."):
            base = (importer.parent / spec) if not spec.startswith("/") else Path(spec)
            found = probe(base, directory=True, resolver=self)
            if found is None:
                raise ResolveError(f"cannot find module {spec!r} (looked for {base.resolve()})")
            return found
        if spec.startswith("#"):
            return self.resolve_import_map(spec, importer, kind)
        return self.resolve_package(spec, importer, kind)

    def conditions(self, kind: str) -> frozenset[str]:
        return frozenset(BASE_CONDITIONS + (kind, "module", "default"))

    def resolve_import_map(self, spec: str, importer: Path, kind: str) -> Path:
        info = self.package_of(importer)
        imports = info.data.get("imports") if info is not None else None
        if info is None or not isinstance(imports, dict):
            raise ResolveError(f"cannot resolve {spec!r}: no package.json `imports` map applies")
        target = match_map(imports, spec, self.conditions(kind))
        if target is None:
            raise ResolveError(f"{spec!r} is not defined by the `imports` of {info.path}")
        if not target.startswith("./"):
            return self.resolve_package(target, importer, kind)
        return self.package_file(info, target, spec)

    def resolve_package(self, spec: str, importer: Path, kind: str) -> Path:
        name, subpath = split_package(spec)
        if name is None:
            raise ResolveError(f"invalid package specifier {spec!r}")
        # A package may import itself by name through its own `exports`.
        own = self.package_of(importer)
        if own is not None and own.data.get("name") == name and "exports" in own.data:
            return self.package_exports(own, subpath, spec, kind)
        looked: list[str] = []
        for folder in [importer.parent, *importer.parent.parents]:
            if folder.name == "node_modules":
                continue
            root = folder / "node_modules" / name
            looked.append(str(folder / "node_modules"))
            if not root.is_dir():
                continue
            info = self.package_at(root)
            if info is not None and "exports" in info.data:
                return self.package_exports(info, subpath, spec, kind)
            return self.legacy_package(root, info, subpath, spec)
        hint = "; run `npm install` in the project" if looked else ""
        raise ResolveError(
            f"cannot find package {name!r} (looked in {', '.join(looked[:3])}"
            f"{', ...' if len(looked) > 3 else ''}){hint}"
        )

    def package_exports(self, info: PackageInfo, subpath: str, spec: str, kind: str) -> Path:
        exports = info.data["exports"]
        conditions = self.conditions(kind)
        if isinstance(exports, (str, list)) or (
            isinstance(exports, dict) and exports and not any(k.startswith(".") for k in exports)
        ):
            exports = {".": exports}  # sugar: the whole value is the "." entry
        if not isinstance(exports, dict):
            raise ResolveError(f"{info.path}: `exports` must be a string, array or object")
        target = match_map(exports, subpath, conditions)
        if target is None:
            raise ResolveError(
                f"package subpath {subpath!r} is not exported by {info.path} "
                f"(conditions tried: {', '.join(sorted(conditions))})"
            )
        return self.package_file(info, target, spec)

    def package_file(self, info: PackageInfo, target: str, spec: str) -> Path:
        if not target.startswith("./") or "/node_modules/" in target or "/../" in target:
            raise ResolveError(f"{info.path}: invalid target {target!r} for {spec!r}")
        path = real_path(info.root / target)
        if not path.is_file():
            raise ResolveError(f"{spec!r} maps to {path}, which does not exist")
        return path

    def legacy_package(self, root: Path, info: PackageInfo | None, subpath: str, spec: str) -> Path:
        if subpath != ".":
            found = probe(root / subpath[2:], directory=True, resolver=self)
            if found is None:
                raise ResolveError(f"cannot find {spec!r} in {root}")
            return found
        found = self.main_file(root, info)
        if found is None:
            raise ResolveError(
                f"package {spec!r} at {root} has no entry point "
                "(no `exports`, `module`, `main` or index file)"
            )
        return found

    def main_file(self, root: Path, info: PackageInfo | None) -> Path | None:
        if info is not None:
            for key in ("module", "main"):
                value = info.data.get(key)
                if isinstance(value, str) and value:
                    found = probe(root / value, directory=True, resolver=self)
                    if found is not None:
                        return found
        return probe(root / "index", directory=False, resolver=self)


def split_package(spec: str) -> tuple[str | None, str]:
    """('name' or '@scope/name', './sub/path' or '.') of a bare specifier."""
    parts = spec.split("/")
    if spec.startswith("@"):
        if len(parts) < 2 or not parts[0][1:] or not parts[1]:
            return None, "."
        name, rest = "/".join(parts[:2]), parts[2:]
    else:
        if not parts[0]:
            return None, "."
        name, rest = parts[0], parts[1:]
    if name.startswith(".") or "\\" in name or "%" in name:
        return None, "."
    return name, "./" + "/".join(rest) if rest else "."


def match_map(table: dict[str, Any], key: str, conditions: frozenset[str]) -> str | None:
    """Look `key` up in an `exports`/`imports` map: exact keys, then the longest pattern."""
    if key in table and "*" not in key:
        return pick(table[key], conditions, None)
    best: tuple[str, str] | None = None
    for pattern in table:
        star = pattern.find("*")
        if star < 0 or pattern.count("*") != 1:
            continue
        prefix, suffix = pattern[:star], pattern[star + 1 :]
        fits = key.startswith(prefix) and key.endswith(suffix) and len(key) >= len(pattern) - 1
        if fits and (best is None or _pattern_order(pattern) > _pattern_order(best[0])):
            best = (pattern, key[len(prefix) : len(key) - len(suffix)])
    if best is not None:
        return pick(table[best[0]], conditions, best[1])
    # Legacy folder mappings ("./dir/": "./lib/dir/")
    for pattern, value in table.items():
        if pattern.endswith("/") and key.startswith(pattern) and isinstance(value, str):
            return value + key[len(pattern) :]
    return None


def _pattern_order(pattern: str) -> tuple[int, int]:
    return (pattern.find("*"), len(pattern))


def pick(value: Any, conditions: frozenset[str], star: str | None) -> str | None:
    """The target string a map value gives under `conditions` (None: excluded/no match)."""
    stack: list[Any] = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            return current.replace("*", star) if star is not None else current
        if isinstance(current, list):
            stack.extend(reversed(current))
            continue
        if isinstance(current, dict):
            for condition, inner in current.items():
                if condition in conditions:
                    stack.append(inner)
                    break
    return None


@lru_cache(maxsize=4096)
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


def real_path(path: Path) -> Path:
    """`path` made absolute with symbolic links resolved, as Path.resolve() does, but with
    the folder part cached: resolution asks about the same few folders thousands of times."""
    if path.is_symlink():
        return path.resolve()
    absolute = path if path.is_absolute() else Path.cwd() / path
    parent, name = os.path.split(os.path.normpath(absolute))
    return Path(_real_folder(parent)) / name


def probe(base: Path, *, directory: bool, resolver: Resolver | None = None) -> Path | None:
    """The file `base` names: itself, a TypeScript twin, an added extension, or an index
    file (or a folder's package.json `main`)."""
    candidates = [base]
    suffix = base.suffix
    if suffix in (".js", ".jsx"):
        candidates += [base.with_suffix(".ts"), base.with_suffix(".tsx")]
    elif suffix == ".mjs":
        candidates.append(base.with_suffix(".mts"))
    elif suffix == ".cjs":
        candidates.append(base.with_suffix(".cts"))
    candidates += [base.with_name(base.name + ext) for ext in PROBE_SUFFIXES] if base.name else []
    for candidate in candidates:
        if candidate.is_file():
            return real_path(candidate)
    if directory and base.is_dir():
        info = resolver.package_at(base) if resolver is not None else None
        if info is not None and base.resolve() != base.resolve().anchor:
            main = info.data.get("main")
            if isinstance(main, str) and main:
                found = probe(base / main, directory=False)
                if found is not None:
                    return found
        for ext in PROBE_SUFFIXES:
            index = base / f"index{ext}"
            if index.is_file():
                return real_path(index)
    return None
