"""Web Crypto on the host, on Python's `cryptography` (OpenSSL) and `hashlib`.

`crypto.subtle` in JS (js/web/crypto.js) is a thin layer: it turns arguments into JSON
(binary as base64, CryptoKeys as their key records) and sends one `subtle` request per
call; everything Web Crypto defines (algorithm normalization, usages, formats, errors)
happens here. Modules: `algorithms` (names, usages, normalization), `keys` (generate,
import, export), `operations` (sign, verify, encrypt, decrypt, deriveBits), `subtle`
(the methods and the host operation), `node` (node:crypto's callback functions),
`wire` (the message shapes), `errors`, `pool` (the threads slow work runs on).

`cryptography` is imported when a Worker first uses crypto.subtle or node:crypto, not when
the server starts: its OpenSSL bindings cost ~8 MiB of RSS in a process that may never
sign anything (most workflow servers), and that is most of what the memory targets leave
for instances. The first call imports them on the pool's threads (~25 ms of import, in
which the event loop keeps its turns); every later call finds them loaded.
"""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType
from typing import Any

from celld.isolate.host import OpHandler
from celld.isolate.webcrypto.pool import pool

_SUBTLE = "celld.isolate.webcrypto.subtle"
_NODE = "celld.isolate.webcrypto.node"
#: Modules whose import has finished (sys.modules holds a module while it is still being
#: executed, so concurrent first calls wait on the import itself instead).
_ready: dict[str, ModuleType] = {}


async def _loaded(name: str) -> ModuleType:
    module = _ready.get(name)
    if module is None:
        loop = asyncio.get_running_loop()
        module = await loop.run_in_executor(pool(), importlib.import_module, name)
        _ready[name] = module
    return module


async def op_subtle(message: dict[str, Any]) -> Any:
    """The `subtle` host operation (subtle.py), its module loaded when first asked."""
    return await (await _loaded(_SUBTLE)).op_subtle(message)


async def op_nodecrypto(message: dict[str, Any]) -> Any:
    """The `nodecrypto` host operation (node.py), its module loaded when first asked."""
    return await (await _loaded(_NODE)).op_nodecrypto(message)


def crypto_ops() -> dict[str, OpHandler]:
    return {"subtle": op_subtle, "nodecrypto": op_nodecrypto}
