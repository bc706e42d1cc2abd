"""How Web Crypto values cross the bridge, and the key record the isolate keeps.

Messages are JSON, so binary members travel as `{"$b": base64}` (an ArrayBuffer in JS) or
`{"$u8": base64}` (a Uint8Array, as `algorithm.publicExponent` is), and a CryptoKey as
`{"$k": record}`. A key record holds the key's type, algorithm, usages, extractability and
its material (`data`): the raw bytes of a secret key, PKCS #8 DER of a private key,
SubjectPublicKeyInfo DER of a public one. JS keeps the record in the CryptoKey's hidden
slot and hands it back with every operation (see celld/isolate/DECISIONS.md, "Web Crypto
keys"), so the host holds no key between requests.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from celld.isolate.webcrypto.errors import type_error


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def buffer(data: bytes) -> dict[str, str]:
    """An ArrayBuffer for JS."""
    return {"$b": b64(data)}


def uint8(data: bytes) -> dict[str, str]:
    """A Uint8Array for JS."""
    return {"$u8": b64(data)}


def is_bytes(value: Any) -> bool:
    return isinstance(value, dict) and ("$b" in value or "$u8" in value)


def to_bytes(value: Any, what: str) -> bytes:
    """A BufferSource member sent by JS, or a TypeError naming it."""
    if isinstance(value, dict):
        encoded = value.get("$b", value.get("$u8"))
        if isinstance(encoded, str):
            return base64.b64decode(encoded)
    raise type_error(f"{what} must be an ArrayBuffer or ArrayBufferView")


@dataclass
class Key:
    """A CryptoKey's internal slots."""

    type: str  # "secret" | "private" | "public"
    extractable: bool
    algorithm: dict[str, Any]  # the KeyAlgorithm dictionary, bytes as bytes
    usages: list[str]
    data: bytes

    @property
    def name(self) -> str:
        return str(self.algorithm["name"])

    def to_wire(self) -> dict[str, Any]:
        algorithm = {
            k: (uint8(v) if isinstance(v, bytes) else v) for k, v in self.algorithm.items()
        }
        return {
            "$k": {
                "type": self.type,
                "extractable": self.extractable,
                "algorithm": algorithm,
                "usages": list(self.usages),
                "data": b64(self.data),
            }
        }


def to_key(value: Any, what: str) -> Key:
    """The key record JS sent for a CryptoKey argument, or a TypeError."""
    record = value.get("$k") if isinstance(value, dict) else None
    if not isinstance(record, dict):
        raise type_error(f"{what} must be a CryptoKey")
    algorithm = {
        k: (base64.b64decode(v["$u8"]) if isinstance(v, dict) and "$u8" in v else v)
        for k, v in dict(record["algorithm"]).items()
    }
    return Key(
        type=str(record["type"]),
        extractable=bool(record["extractable"]),
        algorithm=algorithm,
        usages=[str(u) for u in record["usages"]],
        data=base64.b64decode(record["data"]),
    )
