"""The errors bindings throw into JS, worded as Cloudflare words them."""

from __future__ import annotations

from celld.isolate.host import HostError


def kv_error(method: str, status: int, detail: str) -> HostError:
    """``KV PUT failed: 413 Value length of ...``: the shape workerd gives KV failures."""
    return HostError(f"KV {method} failed: {status} {detail}")


def type_error(message: str) -> HostError:
    return HostError(message, "TypeError")


def range_error(message: str) -> HostError:
    return HostError(message, "RangeError")
