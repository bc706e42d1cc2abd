"""The compiler settings of each module, read from tsconfig.json as esbuild reads them.

wrangler hands esbuild its config's `jsx_factory` and `jsx_fragment` (defaults
`React.createElement` and `React.Fragment`) and, when set, its `tsconfig`. esbuild then
reads, for each file, the nearest `tsconfig.json` (or `jsconfig.json`) in its folder or a
parent, following `extends` (a path, a package, or a list of them); files inside
`node_modules` get no tsconfig at all, unless wrangler's `tsconfig` names one, which then
applies to every file. Settings a tsconfig gives win over wrangler's defaults.

celld reads the settings that change what the code does: `jsx`, `jsxFactory`,
`jsxFragmentFactory`, `jsxImportSource` and `experimentalDecorators`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from celld.isolate.jsx import JsxOptions
from celld.project import jsonc

_NAMES = ("tsconfig.json", "jsconfig.json")


class TsConfigError(Exception):
    """A tsconfig that cannot be read (the message names the file and, where known, where)."""


@dataclass(frozen=True)
class CompilerSettings:
    """How one module is compiled."""

    jsx: JsxOptions = JsxOptions()
    experimental_decorators: bool = False


@dataclass
class TsConfigs:
    """Finds and reads tsconfig files for a bundle; remembers every file it read."""

    forced: Path | None = None  # wrangler's `tsconfig`, for every file
    jsx_factory: str | None = None  # wrangler's `jsx_factory`
    jsx_fragment: str | None = None  # wrangler's `jsx_fragment`
    files: set[Path] = field(default_factory=set)
    _options: dict[Path, dict[str, Any]] = field(default_factory=dict)
    _nearest: dict[Path, Path | None] = field(default_factory=dict)

    def settings_for(self, module: Path) -> CompilerSettings:
        """The settings esbuild compiles `module` with."""
        config = self.forced if self.forced is not None else self._find(module.parent)
        options = self._compiler_options(config) if config is not None else {}
        base = JsxOptions(
            factory=self.jsx_factory or "React.createElement",
            fragment=self.jsx_fragment or "React.Fragment",
        )
        mode = options.get("jsx")
        mode = mode.lower() if isinstance(mode, str) else None
        jsx = JsxOptions(
            runtime="automatic" if mode in ("react-jsx", "react-jsxdev") else "classic",
            development=mode == "react-jsxdev",
            import_source=_string(options.get("jsxImportSource")) or base.import_source,
            factory=_string(options.get("jsxFactory")) or base.factory,
            fragment=_string(options.get("jsxFragmentFactory")) or base.fragment,
        )
        return CompilerSettings(jsx, options.get("experimentalDecorators") is True)

    def _find(self, folder: Path) -> Path | None:
        if "node_modules" in folder.parts:
            return None
        if folder in self._nearest:
            return self._nearest[folder]
        found = None
        for name in _NAMES:
            if (folder / name).is_file():
                found = folder / name
                break
        if found is None and folder.parent != folder:
            found = self._find(folder.parent)
        self._nearest[folder] = found
        return found

    def _compiler_options(self, path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
        path = path.resolve()
        if path in self._options:
            return self._options[path]
        if path in seen:
            raise TsConfigError(f"{path}: `extends` loops back to this file")
        self.files.add(path)
        try:
            text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        except (OSError, UnicodeDecodeError) as error:
            raise TsConfigError(f"{path}: cannot read tsconfig: {error}") from error
        try:
            data = jsonc.loads(text) if text.strip() else {}
        except jsonc.JSONCError as error:
            raise TsConfigError(f"{path}:{error.line}:{error.column}: {error.msg}") from error
        if not isinstance(data, dict):
            raise TsConfigError(f"{path}: a tsconfig must hold a JSON object")
        merged: dict[str, Any] = {}
        extends = data.get("extends")
        for base in [extends] if isinstance(extends, str) else extends or []:
            if not isinstance(base, str):
                continue
            target = _extended(path.parent, base)
            if target is None:
                raise TsConfigError(f"{path}: cannot find the tsconfig {base!r} it extends")
            merged.update(self._compiler_options(target, (*seen, path)))
        own = data.get("compilerOptions")
        if isinstance(own, dict):
            merged.update(own)
        self._options[path] = merged
        return merged


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _extended(folder: Path, spec: str) -> Path | None:
    """The file an `extends` entry names: a path, or a file or folder in a package."""
    if spec.startswith((".", "/")):
        candidates = [folder / spec, folder / f"{spec}.json", folder / spec / "tsconfig.json"]
        return next((c for c in candidates if c.is_file()), None)
    for parent in (folder, *folder.parents):
        base = parent / "node_modules" / spec
        for candidate in (base, Path(f"{base}.json"), base / "tsconfig.json"):
            if candidate.is_file():
                return candidate
    return None
