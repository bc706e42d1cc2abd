"""The JavaScript runtime that every isolate loads before user code.

The runtime is a set of real `.js` files. In a source checkout they sit in the
top-level `js/` folder; in an installed wheel they are packaged as `celld/_js`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: Loaded first: the built-ins the runtime uses, captured before anything can patch
#: them, then the message bridge every other file talks through.
HOST_FILES = ("primordials.js", "host.js")
#: The web platform globals QuickJS lacks, in dependency order.
WEB_FILES: tuple[str, ...] = (
    "web/common.js",
    "vendor/noble-hashes.js",
    "vendor/noble-ciphers.js",
    "web/digests.js",
    "web/encoding.js",
    "web/console.js",
    "web/events.js",
    "web/timers.js",
    "web/abort.js",
    "web/serialize.js",
    "web/random.js",
    "web/crypto.js",
    "web/url-host.js",
    "web/url.js",
    "web/urlsearchparams.js",
    "web/headers.js",
    "web/streams.js",
    "web/hoststreams.js",
    "web/transform.js",
    "web/blob.js",
    "web/body.js",
    "web/websocket.js",
    "web/fetch.js",
    "web/final.js",
)
#: Cloudflare's modules and the entry points the host drives.
CLOUDFLARE_FILES: tuple[str, ...] = (
    "cloudflare/modules.js",
    "cloudflare/worker_entry.js",
    "workflows/binding.js",
    "workflows/rules.js",
    "workflows/step.js",
    "bindings/common.js",
    "bindings/kv.js",
    "bindings/d1.js",
    "bindings/r2.js",
    "bindings/assets.js",
    "bindings/offline.js",
    "bindings/service.js",
    "bindings/queue.js",
    "seal.js",
)


#: Durable Objects (namespaces and stubs, `ctx.storage`, the object side): loaded after the
#: rest, and only into the isolates of a project that binds objects (see `object_scripts`).
OBJECT_FILES: tuple[str, ...] = (
    "objects/namespace.js",
    "objects/storage.js",
    "objects/object.js",
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


@cache
def object_scripts() -> tuple[Script, ...]:
    """The Durable Object runtime files, read once per process."""
    root = js_root()
    return tuple(Script(name, (root / name).read_text(encoding="utf-8")) for name in OBJECT_FILES)


#: The `node:` modules answered as workerd answers them, with functions that throw
#: (js/node/unsupported.js).
UNSUPPORTED_NODE_MODULES: tuple[str, ...] = (
    "node:child_process",
    "node:cluster",
    "node:dgram",
    "node:domain",
    "node:http2",
    "node:inspector",
    "node:net",
    "node:readline",
    "node:repl",
    "node:tls",
    "node:trace_events",
    "node:tty",
    "node:v8",
    "node:vm",
    "node:wasi",
    "node:worker_threads",
)

#: The `node:` module files nodejs_compat adds, in load order, each with the specifiers it
#: registers and the files it needs loaded before it. process.js, buffer.js and timers.js
#: are always loaded (they define the `process`, `Buffer` and `setImmediate` globals); the
#: others only when the Worker imports what they provide, which keeps isolates that need
#: little cheap.
NODE_FILES: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "node/process.js": (frozenset({"node:process"}), ()),
    "node/events.js": (frozenset({"node:events"}), ()),
    "node/buffer.js": (frozenset({"node:buffer"}), ()),
    "node/util.js": (frozenset({"node:util", "node:util/types", "node:sys"}), ()),
    "node/path.js": (frozenset({"node:path", "node:path/posix"}), ()),
    "node/url.js": (frozenset({"node:url"}), ()),
    "node/assert.js": (frozenset({"node:assert", "node:assert/strict"}), ("node/util.js",)),
    "node/crypto.js": (frozenset({"node:crypto"}), ("node/buffer.js",)),
    "node/timers.js": (frozenset({"node:timers", "node:timers/promises"}), ()),
    "node/os.js": (frozenset({"node:os"}), ()),
    "node/string_decoder.js": (frozenset({"node:string_decoder"}), ("node/buffer.js",)),
    "vendor/unenv-node.js": (frozenset(), ()),
    "node/querystring.js": (
        frozenset({"node:querystring", "node:punycode"}),
        ("vendor/unenv-node.js", "node/buffer.js"),
    ),
    "node/diagnostics_channel.js": (frozenset({"node:diagnostics_channel"}), ()),
    "node/perf_hooks.js": (frozenset({"node:perf_hooks"}), ()),
    "node/async_hooks.js": (frozenset({"node:async_hooks"}), ()),
    "node/stream.js": (
        frozenset({"node:stream", "node:stream/promises"}),
        ("node/events.js", "node/buffer.js"),
    ),
    "vendor/pako.js": (frozenset(), ()),
    "node/zlib.js": (
        frozenset({"node:zlib"}),
        ("vendor/pako.js", "node/buffer.js", "node/events.js", "node/stream.js"),
    ),
    "node/fs.js": (
        frozenset({"node:fs", "node:fs/promises"}),
        ("node/buffer.js", "node/events.js", "node/stream.js"),
    ),
    "node/module.js": (frozenset({"node:module"}), ()),
    "node/dns.js": (frozenset({"node:dns", "node:dns/promises"}), ()),
    "node/http.js": (
        frozenset({"node:http", "node:https"}),
        ("node/buffer.js", "node/events.js", "node/stream.js"),
    ),
    "node/unsupported.js": (frozenset(UNSUPPORTED_NODE_MODULES), ()),
}
_ALWAYS = ("node/process.js", "node/buffer.js", "node/timers.js")
#: Every `node:` specifier celld provides.
NODE_MODULES: frozenset[str] = frozenset().union(*(names for names, _ in NODE_FILES.values()))


@cache
def _node_source(name: str) -> Script:
    return Script(name, (js_root() / name).read_text(encoding="utf-8"))


def node_scripts(used: frozenset[str] | None = None) -> tuple[Script, ...]:
    """The `node:` module files to load for a Worker importing `used` (None: all of them)."""
    if used is not None and "node:module" in used:
        used = None  # createRequire can ask for any of them at run time
    wanted = set(_ALWAYS)
    for name, (provides, needs) in NODE_FILES.items():
        if used is None or provides & used:
            wanted.add(name)
            wanted.update(needs)
    return tuple(_node_source(name) for name in NODE_FILES if name in wanted)


def node_builtins() -> frozenset[str]:
    """The `node:` specifiers the node scripts register."""
    return NODE_MODULES
