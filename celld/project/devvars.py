"""Local-only variables: the ``.dev.vars`` file and ``--var KEY:VALUE`` options.

Secrets are kept out of the Wrangler config, so ``wrangler dev`` reads them from ``.dev.vars``
beside the config file and lets them override ``vars``; ``--var`` overrides both. Values from
either source are strings, as in wrangler.

``.dev.vars`` is read without ``${VAR}`` interpolation because wrangler reads it with
``dotenv.parse``, which does not interpolate. wrangler's fallback to ``.env``/``.env.local``
when there is no ``.dev.vars`` is not implemented yet.
"""

from __future__ import annotations

from pathlib import Path

from dotenv import dotenv_values

from .errors import ConfigError

DEV_VARS_FILE = ".dev.vars"


def read_dev_vars(root: Path) -> dict[str, str]:
    """Variables from ``<root>/.dev.vars``, or ``{}`` when there is no such file."""
    path = root / DEV_VARS_FILE
    if not path.is_file():
        return {}
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
