"""Web Crypto on the host, on Python's `cryptography` (OpenSSL) and `hashlib`.

`crypto.subtle` in JS (js/web/crypto.js) is a thin layer: it turns arguments into JSON
(binary as base64, CryptoKeys as their key records) and sends one `subtle` request per
call; everything Web Crypto defines (algorithm normalization, usages, formats, errors)
happens here. Modules: `algorithms` (names, usages, normalization), `keys` (generate,
import, export), `operations` (sign, verify, encrypt, decrypt, deriveBits), `subtle`
(the methods and the host operation), `node` (node:crypto's callback functions),
`wire` (the message shapes), `errors`.
"""

from __future__ import annotations

from celld.isolate.host import OpHandler
from celld.isolate.webcrypto.node import op_nodecrypto
from celld.isolate.webcrypto.subtle import op_subtle


def crypto_ops() -> dict[str, OpHandler]:
    return {"subtle": op_subtle, "nodecrypto": op_nodecrypto}
