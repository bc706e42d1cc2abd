"""Host operations behind node:zlib's Brotli and node:dns (js/node/zlib.js, js/node/dns.js).

Brotli runs on Google's own library through its Python binding (`brotli`, from the Brotli
authors): no Brotli ships in Python's standard library, and a pure-JavaScript encoder in
QuickJS would be both unaudited and slow. Work runs on the crypto pool's threads (the
binding lets the GIL go), so a large input does not stall the event loop.

node:dns resolves through the host's own resolver (`getaddrinfo`/`getnameinfo`, so
/etc/hosts and the machine's DNS settings apply), where workerd asks Cloudflare's
DNS-over-HTTPS service: celld runs on your machines, which may have no route to 1.1.1.1,
and a Worker under `celld run` should see the names its machine sees. Record types beyond
addresses (TXT, MX, SRV, ...) need a DNS client the standard library lacks; they answer
with a clear error. Answers are data ({value} or {error: {code, syscall, message}}), so
JS builds Node's errors with their `code`.
"""

from __future__ import annotations

import asyncio
import base64
import socket
from typing import Any

import brotli

from celld.isolate.host import HostError, OpHandler
from celld.isolate.webcrypto.pool import pool as _pool

#: The largest input one Brotli call takes (a Worker's memory is 128 MiB).
MAX_BROTLI_INPUT = 64 * 1024 * 1024
#: Node's BROTLI_PARAM_* numbers, and the binding's names for them.
_PARAMS = {0: "mode", 1: "quality", 2: "lgwin", 3: "lgblock"}


def _brotli(message: dict[str, Any]) -> dict[str, Any]:
    data = base64.b64decode(message.get("data") or "")
    if len(data) > MAX_BROTLI_INPUT:
        raise HostError(f"zlib: Brotli input over {MAX_BROTLI_INPUT} bytes", "RangeError")
    if message.get("method") == "compress":
        options: dict[str, int] = {}
        for key, value in (message.get("params") or {}).items():
            name = _PARAMS.get(int(key))
            if name is not None:
                options[name] = int(value)
        try:
            out = brotli.compress(data, **options)
        except brotli.error as error:
            return {"error": {"code": "ERR_BROTLI_INVALID_PARAM", "message": str(error)}}
    else:
        try:
            out = brotli.decompress(data)
        except brotli.error:
            # workerd's wording for input that is not a complete Brotli stream
            return {"error": {"code": None, "message": "Decompression failed"}}
    return {"value": base64.b64encode(out).decode()}


async def op_nodezlib(message: dict[str, Any]) -> Any:
    """The `nodezlib` operation: {method: "compress"|"decompress", data (base64), params}."""
    if message.get("method") not in ("compress", "decompress"):
        raise HostError(f"zlib: no host method {message.get('method')!r}", "TypeError")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), _brotli, message)


_FAMILIES = {"resolve4": socket.AF_INET, "resolve6": socket.AF_INET6}
_SYSCALLS = {"lookup": "getaddrinfo", "resolve4": "queryA", "resolve6": "queryAaaa"}


async def _addresses(host: str, family: int) -> list[tuple[str, int]]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, None, family=family, type=socket.SOCK_STREAM)
    seen: list[tuple[str, int]] = []
    for info_family, _, _, _, address in infos:
        entry = (str(address[0]), 6 if info_family == socket.AF_INET6 else 4)
        if entry not in seen:
            seen.append(entry)
    return seen


async def op_nodedns(message: dict[str, Any]) -> Any:
    """The `nodedns` operation: {method: lookup|resolve4|resolve6|reverse, host, family}."""
    method = str(message.get("method"))
    host = str(message.get("host") or "")
    try:
        if method == "lookup":
            family = {4: socket.AF_INET, 6: socket.AF_INET6}.get(
                int(message.get("family") or 0), socket.AF_UNSPEC
            )
            return {"value": await _addresses(host, family)}
        if method in _FAMILIES:
            found = await _addresses(host, _FAMILIES[method])
            return {"value": [address for address, _ in found]}
        if method == "reverse":
            loop = asyncio.get_running_loop()
            name, _ = await loop.getnameinfo((host, 0), socket.NI_NAMEREQD)
            return {"value": [name]}
    except socket.gaierror as error:
        code = "ENOTFOUND" if error.errno in (socket.EAI_NONAME, socket.EAI_NODATA) else "ESERVFAIL"
        syscall = _SYSCALLS.get(method, "getHostByAddr")
        return {"error": {"code": code, "syscall": syscall, "message": f"{syscall} {code} {host}"}}
    except (OSError, UnicodeError) as error:
        return {"error": {"code": "EBADNAME", "syscall": method, "message": str(error)}}
    raise HostError(f"dns: no host method {method!r}", "TypeError")


def node_ops() -> dict[str, OpHandler]:
    return {"nodezlib": op_nodezlib, "nodedns": op_nodedns}
