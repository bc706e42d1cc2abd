"""What a CryptoKey does: sign, verify, encrypt, decrypt and deriveBits on `cryptography`.

Each function takes a normalized algorithm dictionary and a key record already checked
for its usage (celld.isolate.webcrypto.subtle) and returns bytes (or a bool for verify).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, keywrap, padding
from cryptography.hazmat.primitives.asymmetric import ec, x25519
from cryptography.hazmat.primitives.asymmetric import padding as rsa_padding
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from celld.isolate.webcrypto.algorithms import (
    DIGEST_BYTES,
    hash_name,
    hash_object,
    integer,
)
from celld.isolate.webcrypto.errors import (
    invalid_access,
    not_supported,
    operation_error,
)
from celld.isolate.webcrypto.keys import CURVE_BYTES, private_key, public_key
from celld.isolate.webcrypto.wire import Key, to_bytes, to_key

_HASHLIB = {"SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}
_DIGESTS = {**_HASHLIB, "MD5": "md5"}


def digest(name: str, data: bytes) -> bytes:
    return hashlib.new(_DIGESTS[name], data).digest()


# -- sign and verify -----------------------------------------------------------------------


def sign(params: dict[str, Any], key: Key, data: bytes) -> bytes:
    name = key.name
    if name == "HMAC":
        return hmac.new(key.data, data, _HASHLIB[key.algorithm["hash"]["name"]]).digest()
    obj = private_key(key)
    if name == "Ed25519":
        return obj.sign(data)
    if name == "ECDSA":
        der = obj.sign(data, ec.ECDSA(hash_object(hash_name(params.get("hash")))))
        r, s = decode_dss_signature(der)
        size = CURVE_BYTES[key.algorithm["namedCurve"]]
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    try:
        return obj.sign(data, _rsa_signature_padding(params, key), _key_hash(key))
    except ValueError as error:
        raise operation_error(f"RSA signing failed: {error}") from None


def verify(params: dict[str, Any], key: Key, signature: bytes, data: bytes) -> bool:
    name = key.name
    if name == "HMAC":
        expected = hmac.new(key.data, data, _HASHLIB[key.algorithm["hash"]["name"]]).digest()
        return hmac.compare_digest(expected, signature)
    obj = public_key(key)
    try:
        if name == "Ed25519":
            if len(signature) != 64:
                return False
            obj.verify(signature, data)
        elif name == "ECDSA":
            size = CURVE_BYTES[key.algorithm["namedCurve"]]
            hash_ = hash_object(hash_name(params.get("hash")))
            if len(signature) != 2 * size:
                return False
            r = int.from_bytes(signature[:size], "big")
            s = int.from_bytes(signature[size:], "big")
            obj.verify(encode_dss_signature(r, s), data, ec.ECDSA(hash_))
        else:
            obj.verify(signature, data, _rsa_signature_padding(params, key), _key_hash(key))
    except (InvalidSignature, ValueError):
        return False
    return True


def _key_hash(key: Key) -> hashes.HashAlgorithm:
    return hash_object(key.algorithm["hash"]["name"])


def _rsa_signature_padding(params: dict[str, Any], key: Key) -> rsa_padding.AsymmetricPadding:
    if key.name == "RSASSA-PKCS1-v1_5":
        return rsa_padding.PKCS1v15()
    salt = integer(params, "saltLength")
    return rsa_padding.PSS(mgf=rsa_padding.MGF1(_key_hash(key)), salt_length=salt)


# -- encrypt and decrypt -------------------------------------------------------------------


def encrypt(params: dict[str, Any], key: Key, data: bytes) -> bytes:
    return _crypt(params, key, data, encrypting=True)


def decrypt(params: dict[str, Any], key: Key, data: bytes) -> bytes:
    return _crypt(params, key, data, encrypting=False)


def _crypt(params: dict[str, Any], key: Key, data: bytes, *, encrypting: bool) -> bytes:
    name = key.name
    if name == "RSA-OAEP":
        label = params.get("label")
        oaep = rsa_padding.OAEP(
            mgf=rsa_padding.MGF1(_key_hash(key)),
            algorithm=_key_hash(key),
            label=to_bytes(label, "label") if label is not None else None,
        )
        try:
            if encrypting:
                return public_key(key).encrypt(data, oaep)
            return private_key(key).decrypt(data, oaep)
        except ValueError as error:
            raise operation_error(
                f"RSA-OAEP {'en' if encrypting else 'de'}cryption failed: {error}"
            ) from None
    if name == "AES-GCM":
        return _gcm(params, key.data, data, encrypting)
    if name == "AES-CBC":
        return _cbc(params, key.data, data, encrypting)
    if name == "AES-CTR":
        return _ctr(params, key.data, data)
    if name == "AES-KW":
        try:
            if encrypting:
                if len(data) % 8 or len(data) < 16:
                    raise operation_error("AES-KW wraps data of a multiple of 8 bytes, at least 16")
                return keywrap.aes_key_wrap(key.data, data)
            return keywrap.aes_key_unwrap(key.data, data)
        except (keywrap.InvalidUnwrap, ValueError):
            raise operation_error("AES-KW unwrapping failed") from None
    raise not_supported(f"{name} cannot encrypt or decrypt")


def _gcm(params: dict[str, Any], secret: bytes, data: bytes, encrypting: bool) -> bytes:
    iv = to_bytes(params.get("iv"), "iv")
    aad = params.get("additionalData")
    tag_bits = integer(params, "tagLength") if params.get("tagLength") is not None else 128
    if tag_bits not in (32, 64, 96, 104, 112, 120, 128):
        raise operation_error(f"{tag_bits} is not a valid AES-GCM tag length")
    tag_bytes = tag_bits // 8
    if not iv:
        raise operation_error("AES-GCM needs a non-empty iv")
    try:
        if encrypting:
            encryptor = Cipher(algorithms.AES(secret), modes.GCM(iv)).encryptor()
            if aad is not None:
                encryptor.authenticate_additional_data(to_bytes(aad, "additionalData"))
            body = encryptor.update(data) + encryptor.finalize()
            return body + encryptor.tag[:tag_bytes]
        if len(data) < tag_bytes:
            raise operation_error("The AES-GCM ciphertext is shorter than its tag")
        body, tag = data[: len(data) - tag_bytes], data[len(data) - tag_bytes :]
        decryptor = Cipher(
            algorithms.AES(secret), modes.GCM(iv, tag, min_tag_length=tag_bytes)
        ).decryptor()
        if aad is not None:
            decryptor.authenticate_additional_data(to_bytes(aad, "additionalData"))
        return decryptor.update(body) + decryptor.finalize()
    except InvalidTag:
        raise operation_error(
            "Decryption failed. This could be due to a ciphertext authentication failure, bad"
            " padding, incorrect CryptoKey, or another algorithm-specific reason."
        ) from None
    except ValueError as error:
        raise operation_error(f"AES-GCM failed: {error}") from None


def _cbc(params: dict[str, Any], secret: bytes, data: bytes, encrypting: bool) -> bytes:
    iv = to_bytes(params.get("iv"), "iv")
    if len(iv) != 16:
        raise operation_error("AES-CBC needs an iv of 16 bytes")
    cipher = Cipher(algorithms.AES(secret), modes.CBC(iv))
    if encrypting:
        padder = padding.PKCS7(128).padder()
        padded = padder.update(data) + padder.finalize()
        encryptor = cipher.encryptor()
        return encryptor.update(padded) + encryptor.finalize()
    if not data or len(data) % 16:
        raise operation_error("AES-CBC ciphertext must be a non-empty multiple of 16 bytes")
    decryptor = cipher.decryptor()
    padded = decryptor.update(data) + decryptor.finalize()
    try:
        unpadder = padding.PKCS7(128).unpadder()
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise operation_error("AES-CBC decryption failed: bad padding") from None


def _ctr(params: dict[str, Any], secret: bytes, data: bytes) -> bytes:
    """AES-CTR where only the low `length` bits of the counter block count (they wrap
    around without carrying into the rest), as Web Crypto defines it."""
    counter = to_bytes(params.get("counter"), "counter")
    length = integer(params, "length")
    if len(counter) != 16:
        raise operation_error("AES-CTR needs a counter of 16 bytes")
    if not 1 <= length <= 128:
        raise operation_error("AES-CTR counter length must be between 1 and 128 bits")
    blocks = (len(data) + 15) // 16
    if length < 128 and blocks > 1 << length:
        raise operation_error("AES-CTR input is too long for the counter length")
    value = int.from_bytes(counter, "big")
    mask = (1 << length) - 1
    low = value & mask
    fixed = value & ~mask
    out = bytearray()
    at = 0
    while at < len(data):
        # Blocks before the low bits wrap to zero, run as one ordinary CTR stretch.
        room = (mask - low + 1) if length < 128 else blocks
        take = min(len(data) - at, room * 16)
        start = (fixed | low).to_bytes(16, "big")
        encryptor = Cipher(algorithms.AES(secret), modes.CTR(start)).encryptor()
        out += encryptor.update(data[at : at + take]) + encryptor.finalize()
        at += take
        low = 0
    return bytes(out)


# -- deriveBits ----------------------------------------------------------------------------


def derive_bits(params: dict[str, Any], key: Key, length: int | None) -> bytes:
    name = key.name
    if name in ("ECDH", "X25519"):
        return _agree(params, key, length)
    if length is None:
        raise operation_error(f"{name} deriveBits needs a length")
    if length % 8:
        raise operation_error(f"{name} deriveBits length must be a multiple of 8")
    hash_ = hash_name(params.get("hash"))
    salt = to_bytes(params.get("salt"), "salt")
    if name == "PBKDF2":
        iterations = integer(params, "iterations")
        if iterations == 0:
            raise operation_error("PBKDF2 iterations must not be zero")
        if length == 0:
            return b""
        return hashlib.pbkdf2_hmac(_HASHLIB[hash_], key.data, salt, iterations, length // 8)
    info = to_bytes(params.get("info"), "info")
    if length == 0:
        return b""
    if length // 8 > 255 * DIGEST_BYTES[hash_]:
        raise operation_error("HKDF cannot derive that many bits with this hash")
    return HKDF(hash_object(hash_), length // 8, salt or None, info).derive(key.data)


def _agree(params: dict[str, Any], key: Key, length: int | None) -> bytes:
    name = key.name
    peer = to_key(params.get("public"), "Algorithm: public")
    if peer.type != "public":
        raise invalid_access(f"{name}: the public member must be a public key")
    if peer.name != name:
        raise invalid_access(f"{name}: the public key is a {peer.name} key")
    if name == "ECDH" and peer.algorithm.get("namedCurve") != key.algorithm.get("namedCurve"):
        raise invalid_access("ECDH: the public key is on another curve")
    ours = private_key(key)
    theirs = public_key(peer)
    try:
        if name == "ECDH":
            assert isinstance(ours, ec.EllipticCurvePrivateKey)
            secret = ours.exchange(ec.ECDH(), theirs)
        else:
            assert isinstance(ours, x25519.X25519PrivateKey)
            secret = ours.exchange(theirs)
    except ValueError:
        raise operation_error(f"{name} key agreement failed") from None
    if length is None:
        return secret
    if length > len(secret) * 8:
        raise operation_error(f"{name} can derive at most {len(secret) * 8} bits, not {length}")
    out = bytearray(secret[: (length + 7) // 8])
    if length % 8:
        out[-1] &= (0xFF << (8 - length % 8)) & 0xFF
    return bytes(out)
