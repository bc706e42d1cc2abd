"""Local-only variables: ``.dev.vars``, ``.env`` files and ``--var KEY:VALUE`` options.

Secrets are kept out of the Wrangler config, so ``wrangler dev`` reads them from a file beside
the config and lets them override ``vars``; ``--var`` overrides both. Values are strings, as
in wrangler. Which file, as wrangler chooses:

* ``.dev.vars.<env>`` with ``--env <env>`` when it exists, else ``.dev.vars``; read without
  ``${VAR}`` interpolation (wrangler reads it with ``dotenv.parse``, which has none);
* only when neither exists: ``.env``, ``.env.local``, then with an environment
  ``.env.<env>`` and ``.env.<env>.local``, each overriding the ones before, and ``${VAR}``
  references expanded as ``dotenv-expand`` does (celld.project.expand); not at all when
  CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV is false. With CLOUDFLARE_INCLUDE_PROCESS_ENV true,
  celld's own environment variables are vars too, under the files' values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values

from .errors import ConfigError
from .expand import expand_values

DEV_VARS_FILE = ".dev.vars"
LOAD_FROM_DOT_ENV = "CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV"
INCLUDE_PROCESS_ENV = "CLOUDFLARE_INCLUDE_PROCESS_ENV"


def _flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    value = environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ConfigError(Path(name), message=f"{name} must be true or false, not {value!r}")


def dot_env_files(env: str | None) -> tuple[str, ...]:
    """The ``.env`` files wrangler reads, lowest precedence first."""
    names = [".env", ".env.local"]
    if env is not None:
        names += [f".env.{env}", f".env.{env}.local"]
    return tuple(names)


def read_local_vars(
    root: Path, env: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str], tuple[Path, ...]]:
    """The local variables of the config folder `root` for `env`, and the files they came
    from (`celld run` names them, as wrangler's "Using secrets defined in ..." does)."""
    environ = os.environ if environ is None else environ
    candidates = ([root / f"{DEV_VARS_FILE}.{env}"] if env is not None else []) + [
        root / DEV_VARS_FILE
    ]
    for path in candidates:
        if path.is_file():
            return _read_file(path), (path,)
    if not _flag(environ, LOAD_FROM_DOT_ENV, True):
        return {}, ()
    parsed: dict[str, str] = {}
    used: list[Path] = []
    for name in dot_env_files(env):
        path = root / name
        if path.is_file():
            parsed.update(_read_file(path))
            used.append(path)
    base = dict(environ) if _flag(environ, INCLUDE_PROCESS_ENV, False) else {}
    return {**base, **expand_values(parsed, base)}, tuple(used)


def _read_file(path: Path) -> dict[str, str]:
    try:
        # Unparsable lines are skipped (as Node's dotenv does) with a logged warning.
        values = dotenv_values(path, interpolate=False, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, message=f"cannot read file: {exc}") from None
    # A bare `KEY` line has no value; Node's dotenv ignores it, so do we.
    return {key: value for key, value in values.items() if value is not None}


def parse_var_option(text: str) -> tuple[str, str]:
    """Split ``KEY:VALUE`` at the first colon, as wrangler's ``--var`` does.

    The value may be empty and may itself contain colons (``URL:http://x``). Raises
    ``ValueError`` with a message fit for a command-line error.
    """
    key, sep, value = text.partition(":")
    if not sep:
        raise ValueError(f"--var expects KEY:VALUE, got {text!r} (no ':')")
    if not key or key != key.strip():
        raise ValueError(f"--var expects KEY:VALUE with a non-empty key, got {text!r}")
    return key, value
