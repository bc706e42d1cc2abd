"""Finding the Wrangler configuration file of a project and reading it into plain data.

Precedence follows wrangler (``findWranglerConfig`` in workers-sdk): ``wrangler.json``, then
``wrangler.jsonc``, then ``wrangler.toml``. Unlike wrangler, celld looks only in the project
folder it is given and never in parent folders: ``celld run`` names the project explicitly,
and wrangler's separate upward search per file name can let a parent's ``wrangler.json`` win
over the project's own ``wrangler.toml``.

A build tool may *redirect* the project to the config it generated (the Cloudflare Vite plugin
writes ``.wrangler/deploy/config.json`` with ``{"configPath": "../../dist/NAME/wrangler.json"}``
beside the project's own config); wrangler dev and deploy then use the generated one, whose
``main`` is the built Worker and whose assets are the built client, and so does celld.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from . import jsonc
from .errors import ConfigError

CONFIG_FILE_NAMES: tuple[str, ...] = ("wrangler.json", "wrangler.jsonc", "wrangler.toml")
#: where a build tool leaves the path of the config it generated (see the module docstring)
DEPLOY_REDIRECT = Path(".wrangler") / "deploy" / "config.json"
_SUFFIXES = (".json", ".jsonc", ".toml")
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def find_config(project_dir: Path, explicit: Path | None = None) -> Path:
    """Return the config file to use for ``project_dir``.

    ``explicit`` (a ``--config`` option) wins and is taken as given, relative to the current
    directory like wrangler's ``--config``; it must exist and have a supported suffix.
    """
    if explicit is not None:
        if explicit.suffix not in _SUFFIXES:
            raise ConfigError(
                explicit,
                message=f"unsupported configuration file type (expected {', '.join(_SUFFIXES)})",
            )
        if not explicit.is_file():
            raise ConfigError(explicit, message="configuration file not found")
        return explicit
    if not project_dir.is_dir():
        raise ConfigError(project_dir, message="project folder not found")
    redirect = redirected_config(project_dir)
    if redirect is not None:
        return redirect
    for name in CONFIG_FILE_NAMES:
        candidate = project_dir / name
        if candidate.is_file():
            return candidate
    raise ConfigError(
        project_dir,
        message="no Wrangler configuration file found (looked for "
        + ", ".join(CONFIG_FILE_NAMES)
        + ")",
    )


def redirected_config(project_dir: Path) -> Path | None:
    """The generated config ``.wrangler/deploy/config.json`` points to, if there is one.

    A redirect that is unreadable or points nowhere is an error, as in wrangler: serving the
    unbuilt config instead would hide a stale or broken build.
    """
    marker = project_dir / DEPLOY_REDIRECT
    if not marker.is_file():
        return None
    data = read_raw(marker)
    target = data.get("configPath")
    if not isinstance(target, str) or not target:
        raise ConfigError(marker, message="configPath must name the generated configuration")
    path = (marker.parent / target).resolve()
    if not path.is_file():
        raise ConfigError(
            marker, message=f"configPath {target!r} names no file ({path}); run the build again"
        )
    return path


def state_home(project_dir: Path, explicit: Path | None, config_root: Path) -> Path:
    """The folder the default ``.celld`` state folder goes in: the project's own, also when a
    build redirected it to a generated config (a rebuild empties the build's output folder,
    and wrangler too keeps its ``.wrangler/state`` in the project)."""
    if explicit is None and (project_dir / DEPLOY_REDIRECT).is_file():
        return project_dir
    return config_root


def read_raw(path: Path) -> dict[str, Any]:
    """Parse the file by its suffix; syntax errors carry the parser's line and column."""
    if path.suffix not in _SUFFIXES:
        raise ConfigError(
            path, message=f"unsupported configuration file type (expected {', '.join(_SUFFIXES)})"
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(path, message="configuration file not found") from None
    except OSError as exc:
        raise ConfigError(path, message=f"cannot read file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, message=f"file is not valid UTF-8 (byte {exc.start})") from None

    if path.suffix == ".toml":
        data = _parse_toml(path, text.removeprefix("\ufeff"))
    else:
        # wrangler reads .json with the same JSONC parser, so comments are allowed in both.
        try:
            data = jsonc.loads(text)
        except jsonc.JSONCError as exc:
            raise ConfigError(path, message=exc.msg, line=exc.line, column=exc.column) from None
    if not isinstance(data, dict):
        raise ConfigError(path, message="the configuration must be an object at the top level")
    return data


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "colno", None)
        match = _TOML_POSITION.search(message)
        if match:
            message = message[: match.start()]
            line, column = int(match.group(1)), int(match.group(2))
        raise ConfigError(path, message=message, line=line, column=column) from None
