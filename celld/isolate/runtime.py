"""The JavaScript runtime that every isolate loads before user code.

The runtime is a set of real `.js` files. In a source checkout they sit in the
top-level `js/` folder; in an installed wheel they are packaged as `celld/_js`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: Loaded first: the message bridge every other file talks through.
HOST_FILES = ("host.js",)
#: The web platform globals QuickJS lacks, in dependency order.
WEB_FILES: tuple[str, ...] = (
    "web/common.js",
    "web/encoding.js",
    "web/console.js",
    "web/events.js",
    "web/timers.js",
    "web/abort.js",
    "web/serialize.js",
    "web/crypto.js",
    "web/url-host.js",
    "web/url.js",
    "web/urlsearchparams.js",
    "web/headers.js",
    "web/streams.js",
    "web/blob.js",
    "web/body.js",
    "web/fetch.js",
    "web/final.js",
)
#: Cloudflare's modules and the entry points the host drives.
CLOUDFLARE_FILES: tuple[str, ...] = (
    "cloudflare/modules.js",
    "cloudflare/worker_entry.js",
    "workflows/binding.js",
    "workflows/step.js",
)


@dataclass(frozen=True)
class Script:
    """A classic script to evaluate, with the name stack traces should show."""

    name: str
    source: str


def js_root() -> Path:
    packaged = Path(__file__).resolve().parent.parent / "_js"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent.parent / "js"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(
        f"celld's JavaScript runtime is missing (looked in {packaged} and {checkout})"
    )


@cache
def runtime_scripts() -> tuple[Script, ...]:
    """Every runtime file, read once per process."""
    root = js_root()
    names = HOST_FILES + WEB_FILES + CLOUDFLARE_FILES
    return tuple(Script(name, (root / name).read_text(encoding="utf-8")) for name in names)


#: The `node:` modules nodejs_compat adds, loaded after the runtime (js/node/), in order.
NODE_FILES: tuple[str, ...] = (
    "node/process.js",
    "node/events.js",
    "node/buffer.js",
    "node/util.js",
    "node/path.js",
    "node/url.js",
    "node/assert.js",
    "node/crypto.js",
    "node/stream.js",
)
#: What they register.
NODE_MODULES: frozenset[str] = frozenset(
    {
        "node:process",
        "node:events",
        "node:buffer",
        "node:util",
        "node:util/types",
        "node:path",
        "node:path/posix",
        "node:url",
        "node:assert",
        "node:assert/strict",
        "node:crypto",
        "node:stream",
        "node:stream/promises",
    }
)


@cache
def node_scripts() -> tuple[Script, ...]:
    """The `node:` module files, read once per process."""
    root = js_root()
    return tuple(Script(name, (root / name).read_text(encoding="utf-8")) for name in NODE_FILES)


def node_builtins() -> frozenset[str]:
    """The `node:` specifiers the node scripts register."""
    return NODE_MODULES
