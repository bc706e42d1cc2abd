"""The SubtleCrypto methods as one host operation, `subtle`: {method, args} -> answer.

js/web/crypto.js sends every crypto.subtle call here (crypto.subtle is asynchronous, so a
request and its answer through the bridge fit it exactly) and rebuilds CryptoKeys and
DOMExceptions from the answer. Slow work runs on a small thread pool of its own: RSA key
generation or a PBKDF2 of many iterations takes long enough to stall the event loop,
and OpenSSL lets the GIL go while it computes; cheap calls (a digest of a few KiB, HMAC,
an ECDSA signature) are answered on the loop, where a hop to the pool would cost more.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from celld.isolate.webcrypto import keys, operations
from celld.isolate.webcrypto.algorithms import integer, normalize
from celld.isolate.webcrypto.errors import invalid_access, type_error
from celld.isolate.webcrypto.pool import pool as _pool
from celld.isolate.webcrypto.wire import Key, buffer, to_bytes, to_key


def _usable(key: Key, algorithm: Any, operation: str, usage: str) -> dict[str, Any]:
    """The algorithm for a key about to be used, checked as workerd checks it: a known name,
    then the key's usages, then the key's algorithm, then what the operation provides."""
    params = normalize(algorithm, None)
    if usage not in key.usages:
        raise invalid_access(
            f'Requested key usage "{usage}" does not match any usage listed in this CryptoKey.'
        )
    if params["name"] != key.name:
        raise invalid_access(
            f'Requested algorithm "{params["name"]}" does not match this CryptoKey\'s'
            f' algorithm "{key.name}".'
        )
    return normalize(params, operation)


def _boolean(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise type_error(f"{what} must be a boolean")
    return value


def _usages(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise type_error("keyUsages must be a sequence of strings")
    return value


def _key_answer(made: Key | tuple[Key, Key]) -> Any:
    if isinstance(made, tuple):
        public, private = made
        return {"publicKey": public.to_wire(), "privateKey": private.to_wire()}
    return made.to_wire()


def _exported(value: bytes | dict[str, Any]) -> Any:
    return buffer(value) if isinstance(value, bytes) else value


# -- the methods ---------------------------------------------------------------------------


def digest(algorithm: Any, data: Any) -> Any:
    params = normalize(algorithm, "digest")
    return buffer(operations.digest(params["name"], to_bytes(data, "data")))


def generate_key(algorithm: Any, extractable: Any, usages: Any) -> Any:
    params = normalize(algorithm, "generateKey")
    return _key_answer(
        keys.generate_key(params, _boolean(extractable, "extractable"), _usages(usages))
    )


def import_key(format_: Any, data: Any, algorithm: Any, extractable: Any, usages: Any) -> Any:
    params = normalize(algorithm, "importKey")
    made = keys.import_key(
        str(format_), data, params, _boolean(extractable, "extractable"), _usages(usages)
    )
    return made.to_wire()


def export_key(format_: Any, key: Any) -> Any:
    return _exported(keys.export_key(str(format_), to_key(key, "key")))


def sign(algorithm: Any, key: Any, data: Any) -> Any:
    record = to_key(key, "key")
    params = _usable(record, algorithm, "sign", "sign")
    return buffer(operations.sign(params, record, to_bytes(data, "data")))


def verify(algorithm: Any, key: Any, signature: Any, data: Any) -> Any:
    record = to_key(key, "key")
    params = _usable(record, algorithm, "verify", "verify")
    return operations.verify(
        params, record, to_bytes(signature, "signature"), to_bytes(data, "data")
    )


def encrypt(algorithm: Any, key: Any, data: Any) -> Any:
    record = to_key(key, "key")
    params = _usable(record, algorithm, "encrypt", "encrypt")
    return buffer(operations.encrypt(params, record, to_bytes(data, "data")))


def decrypt(algorithm: Any, key: Any, data: Any) -> Any:
    record = to_key(key, "key")
    params = _usable(record, algorithm, "decrypt", "decrypt")
    return buffer(operations.decrypt(params, record, to_bytes(data, "data")))


def derive_bits(algorithm: Any, key: Any, length: Any) -> Any:
    record = to_key(key, "baseKey")
    params = _usable(record, algorithm, "deriveBits", "deriveBits")
    bits = None if length is None else integer({"length": length}, "length")
    return buffer(operations.derive_bits(params, record, bits))


def derive_key(algorithm: Any, key: Any, derived: Any, extractable: Any, usages: Any) -> Any:
    record = to_key(key, "baseKey")
    params = _usable(record, algorithm, "deriveBits", "deriveKey")
    derived_params = normalize(derived, "get key length")
    import_params = normalize(derived, "importKey")
    length = keys.key_length(derived_params)
    secret = operations.derive_bits(params, record, length)
    made = keys.import_key(
        "raw", buffer(secret), import_params, _boolean(extractable, "extractable"), _usages(usages)
    )
    return made.to_wire()


def wrap_key(format_: Any, key: Any, wrapping_key: Any, algorithm: Any) -> Any:
    wrapper = to_key(wrapping_key, "wrappingKey")
    params = _usable(wrapper, algorithm, "wrapKey", "wrapKey")
    exported = keys.export_key(str(format_), to_key(key, "key"))
    if isinstance(exported, dict):
        exported = json.dumps(exported, separators=(",", ":")).encode()
    return buffer(operations.encrypt(params, wrapper, exported))


def unwrap_key(
    format_: Any,
    wrapped: Any,
    unwrapping_key: Any,
    algorithm: Any,
    unwrapped_algorithm: Any,
    extractable: Any,
    usages: Any,
) -> Any:
    unwrapper = to_key(unwrapping_key, "unwrappingKey")
    params = _usable(unwrapper, algorithm, "unwrapKey", "unwrapKey")
    import_params = normalize(unwrapped_algorithm, "importKey")
    data = operations.decrypt(params, unwrapper, to_bytes(wrapped, "wrappedKey"))
    key_data: Any
    if str(format_) == "jwk":
        try:
            key_data = json.loads(data)
        except ValueError:
            raise type_error("The unwrapped key is not a JSON Web Key") from None
    else:
        key_data = buffer(data)
    made = keys.import_key(
        str(format_),
        key_data,
        import_params,
        _boolean(extractable, "extractable"),
        _usages(usages),
    )
    return made.to_wire()


METHODS: dict[str, Callable[..., Any]] = {
    "digest": digest,
    "generateKey": generate_key,
    "importKey": import_key,
    "exportKey": export_key,
    "sign": sign,
    "verify": verify,
    "encrypt": encrypt,
    "decrypt": decrypt,
    "deriveBits": derive_bits,
    "deriveKey": derive_key,
    "wrapKey": wrap_key,
    "unwrapKey": unwrap_key,
}


def call(method: str, args: list[Any]) -> Any:
    """Run one SubtleCrypto method on the calling thread."""
    function = METHODS.get(method)
    if function is None:
        raise type_error(f"crypto.subtle has no method {method!r}")
    return function(*args)


#: Work that may take milliseconds or more goes to the pool: key generation (RSA), key
#: derivation (PBKDF2 iterations), wrapping (RSA), RSA private-key operations, large data.
_SLOW_METHODS = frozenset({"generateKey", "deriveBits", "deriveKey", "wrapKey", "unwrapKey"})
_INLINE_DATA_CHARS = 96 * 1024  # base64 characters of binary arguments


def _quick(method: str, args: list[Any]) -> bool:
    """True for a call cheap enough to answer on the event loop (a digest of a few KiB,
    HMAC, ECDSA, Ed25519, AES on small data, importing a secret key): a hop to the pool
    and back would cost more than the work."""
    if method in _SLOW_METHODS:
        return False
    size = 0
    for arg in args:
        if not isinstance(arg, dict):
            continue
        if "$b" in arg:
            size += len(str(arg["$b"]))
        record = arg.get("$k")
        if isinstance(record, dict):
            name = str(record.get("algorithm", {}).get("name", ""))
            if name.startswith("RSA") and record.get("type") == "private":
                return False
        if method == "importKey" and ("n" in arg or "$b" in arg and size > 512):
            return False  # an RSA key (JWK or DER) is validated when imported
    return size <= _INLINE_DATA_CHARS


async def op_subtle(message: dict[str, Any]) -> Any:
    """The `subtle` host operation: {method, args}."""
    method = str(message.get("method"))
    args = list(message.get("args") or [])
    if _quick(method, args):
        return call(method, args)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), call, method, args)
