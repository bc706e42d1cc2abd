"""``${VAR}`` references in ``.env`` files, expanded as wrangler expands them (dotenv-expand).

A reference is ``$NAME``, ``${NAME}``, ``${NAME:-default}`` (default when unset or empty) or
``${NAME-default}`` (default when unset); ``\\$`` is a literal dollar sign. A name is looked up
in the process environment wrangler was asked to include first, then among the files' own
values (expanded in file order); an unknown name expands to "". A key the included process
environment sets keeps the process's value. python-dotenv's own
interpolation is not used: it always consults celld's process environment, which wrangler
only does with CLOUDFLARE_INCLUDE_PROCESS_ENV.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_REFERENCE = re.compile(
    r"(?P<escaped>\\\$)"
    r"|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_.]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)


def expand_values(parsed: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
    """`parsed` with every reference expanded against `base`, then `parsed` itself."""
    done: dict[str, str] = {}

    def lookup(name: str) -> str | None:
        if name in base:
            return base[name]
        if name in done:
            return done[name]
        return parsed.get(name)

    def replace(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("braced") or match.group("bare")
        value = lookup(name)
        op = match.group("op")
        if op == ":-" and not value:
            return expand_one(match.group("default") or "")
        if op == "-" and value is None:
            return expand_one(match.group("default") or "")
        return value or ""

    def expand_one(text: str) -> str:
        return _REFERENCE.sub(replace, text)

    for key, value in parsed.items():
        # A variable the process environment sets wins over the file's, as in dotenv-expand.
        done[key] = base[key] if base.get(key) else expand_one(value)
    return done
