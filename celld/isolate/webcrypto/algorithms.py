"""Web Crypto's algorithm names, which operation each provides, and the usages a key may have.

This is the "normalize an algorithm" step of the Web Crypto spec as workerd applies it:
names match case-insensitively and come back in their registered spelling, an algorithm
an operation does not provide is a NotSupportedError, and a missing dictionary member is
a TypeError.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import hashes

from celld.isolate.webcrypto.errors import not_supported, type_error

AES = ("AES-CTR", "AES-CBC", "AES-GCM", "AES-KW")
RSA = ("RSASSA-PKCS1-v1_5", "RSA-PSS", "RSA-OAEP")
EC = ("ECDSA", "ECDH")
OKP = ("Ed25519", "X25519")
KDF = ("PBKDF2", "HKDF")
SHA = ("SHA-1", "SHA-256", "SHA-384", "SHA-512")

#: What each SubtleCrypto method accepts (workerd also allows MD5 for digest).
SUPPORTED: dict[str, tuple[str, ...]] = {
    "digest": (*SHA, "MD5"),
    "generateKey": (*AES, "HMAC", *RSA, *EC, *OKP),
    "importKey": (*AES, "HMAC", *RSA, *EC, *OKP, *KDF),
    "sign": ("HMAC", "RSASSA-PKCS1-v1_5", "RSA-PSS", "ECDSA", "Ed25519"),
    "verify": ("HMAC", "RSASSA-PKCS1-v1_5", "RSA-PSS", "ECDSA", "Ed25519"),
    "encrypt": ("AES-CTR", "AES-CBC", "AES-GCM", "RSA-OAEP"),
    "decrypt": ("AES-CTR", "AES-CBC", "AES-GCM", "RSA-OAEP"),
    "wrapKey": ("AES-CTR", "AES-CBC", "AES-GCM", "AES-KW", "RSA-OAEP"),
    "unwrapKey": ("AES-CTR", "AES-CBC", "AES-GCM", "AES-KW", "RSA-OAEP"),
    "deriveBits": ("ECDH", "X25519", "PBKDF2", "HKDF"),
    "get key length": (*AES, "HMAC", *KDF),
}

_CANONICAL = {
    name.upper(): name for names in SUPPORTED.values() for name in names if name != "get key length"
}

#: Usages a key may have: (secret or private key, public key).
USAGES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    **{
        name: (frozenset({"encrypt", "decrypt", "wrapKey", "unwrapKey"}), frozenset())
        for name in AES
    },
    "AES-KW": (frozenset({"wrapKey", "unwrapKey"}), frozenset()),
    "HMAC": (frozenset({"sign", "verify"}), frozenset()),
    "RSASSA-PKCS1-v1_5": (frozenset({"sign"}), frozenset({"verify"})),
    "RSA-PSS": (frozenset({"sign"}), frozenset({"verify"})),
    "RSA-OAEP": (frozenset({"decrypt", "unwrapKey"}), frozenset({"encrypt", "wrapKey"})),
    "ECDSA": (frozenset({"sign"}), frozenset({"verify"})),
    "Ed25519": (frozenset({"sign"}), frozenset({"verify"})),
    "ECDH": (frozenset({"deriveKey", "deriveBits"}), frozenset()),
    "X25519": (frozenset({"deriveKey", "deriveBits"}), frozenset()),
    "PBKDF2": (frozenset({"deriveKey", "deriveBits"}), frozenset()),
    "HKDF": (frozenset({"deriveKey", "deriveBits"}), frozenset()),
}

HASH_CLASSES: dict[str, type[hashes.HashAlgorithm]] = {
    "SHA-1": hashes.SHA1,
    "SHA-256": hashes.SHA256,
    "SHA-384": hashes.SHA384,
    "SHA-512": hashes.SHA512,
}

#: The digest size (bytes) and HMAC block size (bits) of each hash.
DIGEST_BYTES = {"SHA-1": 20, "SHA-256": 32, "SHA-384": 48, "SHA-512": 64}
BLOCK_BITS = {"SHA-1": 512, "SHA-256": 512, "SHA-384": 1024, "SHA-512": 1024}


def canonical_name(name: Any) -> str | None:
    return _CANONICAL.get(str(name).upper()) if isinstance(name, str) else None


def normalize(algorithm: Any, operation: str | None) -> dict[str, Any]:
    """The algorithm dictionary with its name in registered spelling, or the error workerd
    throws for a name this operation does not provide (`operation` None: any operation)."""
    if isinstance(algorithm, str):
        algorithm = {"name": algorithm}
    if not isinstance(algorithm, dict):
        raise type_error("Algorithm must be a string or an object with a name")
    name = algorithm.get("name")
    if not isinstance(name, str):
        raise type_error("Algorithm: name is required and must be a string")
    found = canonical_name(name)
    if found is None or (operation is not None and found not in SUPPORTED[operation]):
        if operation == "digest":
            raise not_supported("Unrecognized or unimplemented digest algorithm requested.")
        if operation == "generateKey":
            raise not_supported(f'Unrecognized key generation algorithm "{name}" requested.')
        if operation == "importKey":
            raise not_supported(f'Unrecognized key import algorithm "{name}" requested.')
        raise not_supported(f'Unrecognized or unimplemented algorithm "{name}" requested.')
    return {**algorithm, "name": found}


def hash_name(value: Any, what: str = "hash") -> str:
    """A `hash` member (a name or {name}) as one of the SHA names."""
    if value is None:
        raise type_error(f"Algorithm: {what} is required")
    raw = value.get("name") if isinstance(value, dict) else value
    name = canonical_name(raw)
    if name not in HASH_CLASSES:
        raise not_supported(f"Unrecognized or unimplemented hash algorithm {raw!r}")
    return name


def hash_object(name: str) -> hashes.HashAlgorithm:
    return HASH_CLASSES[name]()


def member(params: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """A required member of an algorithm dictionary, of type `kind`."""
    value = params.get(name)
    if value is None:
        raise type_error(f"Algorithm {params.get('name')}: {name} is required")
    if isinstance(value, bool) or not isinstance(value, kind):
        raise type_error(f"Algorithm {params.get('name')}: {name} has the wrong type")
    return value


def integer(params: dict[str, Any], name: str) -> int:
    """An unsigned-long member (WebIDL truncates numbers)."""
    value = member(params, name, (int, float))
    return int(value)
