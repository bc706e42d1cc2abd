"""A per-project cache of the bundled module graph, keyed by the contents of its inputs.

Bundling a project with npm dependencies parses every file with tree-sitter (a few hundred
milliseconds for hono and zod). The result depends only on the bytes of the files that
were read (modules, package.json files), on which files exist in the folders they sit in,
on the options, and on celld's own bundler code; so a cached bundle is reused when all of
those hash the same as when it was made, and rebuilt otherwise. Checking costs one read
and hash of each input.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celld.isolate.modules import Bundle, _Span

log = logging.getLogger(__name__)

_FORMAT = 2
_BUNDLER_FILES = (
    "modules.py",
    "typescript.py",
    "commonjs.py",
    "resolver.py",
    "jsx.py",
    "tsconfig.py",
    "decorators.py",
)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _listing(folder: Path) -> str:
    try:
        return _digest("\0".join(sorted(os.listdir(folder))).encode("utf-8"))
    except OSError:
        return "missing"


def _file(path: Path) -> str:
    try:
        return _digest(path.read_bytes())
    except OSError:
        return "missing"


def _bundler_version() -> str:
    here = Path(__file__).resolve().parent
    return _digest(b"".join(_file(here / name).encode() for name in _BUNDLER_FILES))


def _inputs(bundle: Bundle, packages: list[Path]) -> dict[str, str]:
    """What the bundle was made from: file contents and the listings of their folders."""
    inputs: dict[str, str] = {}
    for path in [*bundle.files, *packages]:
        inputs[f"file:{path}"] = _file(path)
        inputs[f"dir:{path.parent}"] = _listing(path.parent)
    return inputs


def _still_valid(inputs: dict[str, str]) -> bool:
    for key, digest in inputs.items():
        kind, _, name = key.partition(":")
        current = _file(Path(name)) if kind == "file" else _listing(Path(name))
        if current != digest:
            return False
    return True


def _encode(bundle: Bundle) -> dict[str, Any]:
    return {
        "source": bundle.source,
        "files": [str(p) for p in bundle.files],
        "builtins": list(bundle.builtins),
        "spans": [
            [s.display, s.first_line, s.line_count, [[k, v] for k, v in s.anchors.items()]]
            for s in bundle.spans
        ],
    }


def _decode(data: dict[str, Any]) -> Bundle:
    spans = tuple(
        _Span(
            display,
            first_line,
            line_count,
            {int(line): tuple(tuple(a) for a in anchors) for line, anchors in rows},
        )
        for display, first_line, line_count, rows in data["spans"]
    )
    files = tuple(Path(p) for p in data["files"])
    return Bundle(data["source"], files, spans, tuple(data["builtins"]))


def cached_bundle(
    cache_dir: Path | None,
    key: dict[str, Any],
    build: Callable[[], tuple[Bundle, list[Path]]],
) -> Bundle:
    """The bundle `build()` would make, from `cache_dir` when its inputs are unchanged.

    `key` holds the options that change the result (entry, root, builtins, flags); `build`
    returns the bundle and the package.json files it read.
    """
    if cache_dir is None:
        return build()[0]
    name = _digest(json.dumps([_FORMAT, _bundler_version(), key], sort_keys=True).encode())
    path = cache_dir / f"bundle-{name[:32]}.json"
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = None
    if isinstance(stored, dict) and _still_valid(stored.get("inputs", {"x:": "?"})):
        try:
            return _decode(stored["bundle"])
        except (KeyError, TypeError, ValueError) as error:
            log.warning("ignoring a damaged module cache entry %s: %s", path, error)
    bundle, packages = build()
    record = {"inputs": _inputs(bundle, packages), "bundle": _encode(bundle)}
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record), encoding="utf-8")
        temporary.replace(path)
    except OSError as error:
        log.warning("cannot write the module cache at %s: %s", cache_dir, error)
    return bundle
