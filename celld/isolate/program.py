"""What an isolate evaluates: the runtime plus a Worker bundle, joined once per process."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from celld.isolate.bundle_cache import cached_bundle
from celld.isolate.compat import compat_script
from celld.isolate.linemap import LineMap, join_scripts
from celld.isolate.modules import BUILTIN_MODULES, Bundle, build_bundle, node_env
from celld.isolate.runtime import Script, node_builtins, node_scripts, runtime_scripts
from celld.isolate.tsconfig import TsConfigs

#: The compatibility flags that turn on the `node:` modules.
NODEJS_COMPAT_FLAGS = frozenset({"nodejs_compat", "nodejs_compat_v2"})


@dataclass(frozen=True)
class Program:
    """The joined source every isolate of one Worker evaluates, and its line map."""

    script: Script
    lines: LineMap
    bundle: Bundle | None

    @cached_property
    def version(self) -> str | None:
        """The Worker's version: a hash of its bundled code (None without a Worker). An
        instance records the version it started on (celld.engine.versions)."""
        if self.bundle is None:
            return None
        return hashlib.sha256(self.bundle.source.encode()).hexdigest()[:16]


#: The modules that read the Worker's own files at run time (node:fs's /bundle, and
#: node:module's require by path).
_FILE_READERS = frozenset({"node:fs", "node:fs/promises", "node:module"})


def bundle_files_scripts(bundle: Bundle, entry: Path) -> tuple[Script, ...]:
    """The script that hands node:fs the Worker's modules as /bundle and node:module their
    bundle indexes; empty unless the Worker imports one of them (the files would otherwise
    cost every isolate their size again). A module's place under /bundle is its path from
    the entry's folder, as wrangler's bundle names modules from the main module's folder;
    modules outside it (packages of a parent folder) are named from the file system root."""
    if not (_FILE_READERS & set(bundle.builtins)):
        return ()
    base = entry.resolve().parent
    files: dict[str, str] = {}
    paths: dict[str, int] = {}
    for index, path in enumerate(bundle.files):
        try:
            name = path.relative_to(base).as_posix()
        except ValueError:
            name = path.as_posix().lstrip("/")
        paths[f"bundle/{name}"] = index
        paths[path.as_posix().lstrip("/")] = index
        if "node:fs" in bundle.builtins or "node:fs/promises" in bundle.builtins:
            files[name] = path.read_bytes().decode("utf-8", "replace")
    source = (
        f"globalThis.__celld_bundle_files = {json.dumps(files)};\n"
        f"globalThis.__celld_bundle_paths = {json.dumps(paths)};\n"
    )
    return (Script("celld bundle files", source),)


def build_program(
    entry: Path | None,
    extra: tuple[Script, ...] = (),
    *,
    root: Path | None = None,
    compatibility_flags: Iterable[str] = (),
    compatibility_date: str | None = None,
    cache_dir: Path | None = None,
    tsconfig: Path | None = None,
    jsx_factory: str | None = None,
    jsx_fragment: str | None = None,
) -> Program:
    """Bundle the Worker at `entry` (None: runtime only) behind the runtime files.

    File names in errors and stack traces are shown relative to `root` (the project).
    `compatibility_flags` with nodejs_compat adds the `node:` modules; with
    `compatibility_date` they choose the runtime's date-gated behaviours
    (`celld.isolate.compat`); `cache_dir` keeps the
    bundled module graph between runs (see `celld.isolate.bundle_cache`); `tsconfig`,
    `jsx_factory` and `jsx_fragment` are the wrangler config's (`celld.isolate.tsconfig`).
    """
    compatibility_flags = tuple(compatibility_flags)
    nodejs_compat = bool(NODEJS_COMPAT_FLAGS & set(compatibility_flags))
    bundle = None
    if entry is not None:
        builtins = BUILTIN_MODULES | (node_builtins() if nodejs_compat else frozenset())
        key = {
            "entry": str(Path(entry).resolve()),
            "root": str(root.resolve()) if root is not None else None,
            "builtins": sorted(builtins),
            "nodejs_compat": nodejs_compat,
            "tsconfig": str(tsconfig.resolve()) if tsconfig is not None else None,
            "jsx": [jsx_factory, jsx_fragment],
            "node_env": node_env(),
        }
        bundle = cached_bundle(
            cache_dir,
            key,
            lambda: build_bundle(
                entry,
                builtins=builtins,
                root=root,
                nodejs_compat=nodejs_compat,
                tsconfigs=TsConfigs(tsconfig, jsx_factory, jsx_fragment),
            ),
        )
    node: tuple[Script, ...] = ()
    if nodejs_compat:
        node = node_scripts(None if bundle is None else frozenset(bundle.builtins))
        if bundle is not None and entry is not None:
            node = bundle_files_scripts(bundle, Path(entry)) + node
    # The `node:` modules are runtime code: they load before seal.js takes the reference
    # state of the built-ins (node:async_hooks wraps Promise.prototype.then).
    runtime = runtime_scripts()
    assert runtime[-1].name == "seal.js"
    compat = compat_script(compatibility_date, compatibility_flags)
    scripts = (compat,) + runtime[:-1] + node + runtime[-1:] + extra
    parts = [(s.name, s.source, None) for s in scripts]
    if bundle is not None:
        parts.append((str(entry), bundle.source, bundle.locate))
    source, lines = join_scripts(parts)
    return Program(Script("celld program", source), lines, bundle)
