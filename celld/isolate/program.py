"""What an isolate evaluates: the runtime plus a Worker bundle, joined once per process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from celld.isolate.linemap import LineMap, join_scripts
from celld.isolate.modules import Bundle, bundle_worker
from celld.isolate.runtime import Script, runtime_scripts


@dataclass(frozen=True)
class Program:
    """The joined source every isolate of one Worker evaluates, and its line map."""

    script: Script
    lines: LineMap
    bundle: Bundle | None


def build_program(
    entry: Path | None, extra: tuple[Script, ...] = (), *, root: Path | None = None
) -> Program:
    """Bundle the Worker at `entry` (None: runtime only) behind the runtime files.

    File names in errors and stack traces are shown relative to `root` (the project).
    """
    parts = [(s.name, s.source, None) for s in runtime_scripts() + extra]
    bundle = None
    if entry is not None:
        bundle = bundle_worker(entry, root=root)
        parts.append((str(entry), bundle.source, bundle.locate))
    source, lines = join_scripts(parts)
    return Program(Script("celld program", source), lines, bundle)
