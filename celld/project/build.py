"""``[build] command``: a project's own build step, run before celld loads ``main``.

As under ``wrangler dev``, the command runs in a shell (``sh -c``), its output is shown
line by line behind ``[custom build]``, and a failure stops ``celld run`` before it
serves anything. ``cwd`` is taken relative to the config file's folder (its default);
wrangler takes it relative to the folder it was started in, which is the same folder
when it is started in the project, as it usually is.

The build runs before serving and, unless ``celld run --no-watch``, again whenever a file
under ``watch_dir`` changes (default ``src``; a folder or a list of them, relative to the
config file's folder), before the Worker is reloaded (celld/server/reload.py).

The section is read here on its own, before the rest of the config is checked, because
the build may be what creates ``main``. With ``--env NAME`` it is ``[env.NAME.build]`` when
that environment has one, else the top level's, whole (wrangler inherits `build` as one
value: an environment's ``build`` replaces the top level's, keys are not merged).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from .environments import select_environment
from .errors import ConfigError
from .files import read_raw
from .schema import BuildModel, render_errors

log = logging.getLogger("celld.build")
PREFIX = "[custom build]"


class _BuildSection(BaseModel):
    """Only ``build``, validated as in the whole config (errors read ``build.<key>``)."""

    model_config = ConfigDict(strict=True, frozen=True)
    build: BuildModel


@dataclass(frozen=True)
class BuildStep:
    command: str
    cwd: Path
    #: folders whose changes run the command again (reload on change)
    watch_dirs: tuple[Path, ...] = ()


def read_build(path: Path, env: str | None = None) -> BuildStep | None:
    """The build step of the config's environment `env` (None: the top level), or None
    when it has no ``[build] command``."""
    raw = select_environment(path, read_raw(path), env).raw.get("build")
    if raw is None:
        return None
    try:
        model = _BuildSection.model_validate({"build": raw}).build
    except ValidationError as error:
        raise ConfigError(path, issues=render_errors(error)) from None
    if not model.command or not model.command.strip():
        return None
    root = path.resolve().parent
    cwd = (root / model.cwd).resolve() if model.cwd else root
    if not cwd.is_dir():
        raise ConfigError(path, "build.cwd", f"not a folder: {model.cwd!r} (resolved to {cwd})")
    given = model.watch_dir if model.watch_dir is not None else "src"
    folders = [given] if isinstance(given, str) else given
    return BuildStep(model.command.strip(), cwd, tuple((root / f).resolve() for f in folders))


class BuildFailed(Exception):
    """The build command failed: `celld run` stops with this message."""


def run_build(step: BuildStep) -> None:
    """Run the build command, showing its output; raise BuildFailed if it fails."""
    log.info("%s Running: %s", PREFIX, step.command)
    try:
        process = subprocess.Popen(
            step.command,
            shell=True,
            cwd=step.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    except OSError as error:
        raise BuildFailed(f"Running custom build `{step.command}` failed: {error}") from None
    assert process.stdout is not None
    for raw in process.stdout:
        log.info("%s %s", PREFIX, raw.decode(sys.getdefaultencoding(), "replace").rstrip("\n"))
    code = process.wait()
    if code != 0:
        how = f"was stopped by signal {-code}" if code < 0 else f"exited with code {code}"
        raise BuildFailed(
            f"Running custom build `{step.command}` failed: it {how}. There are likely more "
            "logs from your build command above."
        )
