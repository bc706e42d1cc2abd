"""node:crypto's callback functions on the host: pbkdf2, hkdf, scrypt, sign, verify and
generateKeyPair, with Node's defaults (DER-encoded ECDSA signatures, PKCS #1 v1.5 RSA
padding, PEM keys of any of Node's formats).

js/node/crypto.js sends them as one `nodecrypto` request ({method, ...}); their synchronous
twins that need OpenSSL (createSign, generateKeyPairSync) are refused there, since JS
reaches the host only asynchronously.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa, x25519
from cryptography.hazmat.primitives.asymmetric import padding as rsa_padding
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from celld.isolate.host import HostError
from celld.isolate.webcrypto.keys import CURVE_BYTES, CURVES, b64url, int_bytes
from celld.isolate.webcrypto.pool import pool as _pool
from celld.isolate.webcrypto.wire import Key

#: Node's digest names (js/node/crypto.js normalizes them) as `cryptography` hashes.
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "md5": hashes.MD5,
    "sha1": hashes.SHA1,
    "sha224": hashes.SHA224,
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
    "sha512-224": hashes.SHA512_224,
    "sha512-256": hashes.SHA512_256,
}
_NODE_CURVES = {
    "P-256": "P-256",
    "prime256v1": "P-256",
    "secp256r1": "P-256",
    "P-384": "P-384",
    "secp384r1": "P-384",
    "P-521": "P-521",
    "secp521r1": "P-521",
}
RSA_PKCS1_PSS_PADDING = 6
RSA_PSS_SALTLEN_DIGEST = -1
RSA_PSS_SALTLEN_MAX_SIGN = -2


def _error(message: str, name: str = "Error") -> HostError:
    return HostError(message, name)


def _bytes(message: dict[str, Any], name: str) -> bytes:
    return base64.b64decode(message.get(name) or "")


def _hash(name: Any) -> hashes.HashAlgorithm:
    found = _HASHES.get(str(name))
    if found is None:
        raise _error(f"Invalid digest: {name}", "TypeError")
    return found()


# -- key derivation ------------------------------------------------------------------------


def pbkdf2(message: dict[str, Any]) -> str:
    name = _hash(message["digest"]).name
    derived = hashlib.pbkdf2_hmac(
        name,
        _bytes(message, "password"),
        _bytes(message, "salt"),
        int(message["iterations"]),
        int(message["keylen"]),
    )
    return base64.b64encode(derived).decode("ascii")


def hkdf(message: dict[str, Any]) -> str:
    derived = HKDF(
        _hash(message["digest"]),
        int(message["keylen"]),
        _bytes(message, "salt") or None,
        _bytes(message, "info"),
    ).derive(_bytes(message, "ikm"))
    return base64.b64encode(derived).decode("ascii")


def scrypt(message: dict[str, Any]) -> str:
    try:
        derived = hashlib.scrypt(
            _bytes(message, "password"),
            salt=_bytes(message, "salt"),
            n=int(message["N"]),
            r=int(message["r"]),
            p=int(message["p"]),
            maxmem=int(message["maxmem"]) + 1024 * 1024,
            dklen=int(message["keylen"]),
        )
    except ValueError as error:
        raise _error(f"Invalid scrypt params: {error}", "RangeError") from None
    return base64.b64encode(derived).decode("ascii")


# -- keys ----------------------------------------------------------------------------------


def _load(spec: dict[str, Any], private: bool) -> Any:
    """A key argument: {pem}, {der, type}, {jwk} or {record} (a CryptoKey's)."""
    try:
        if "record" in spec:
            record = spec["record"]
            der = base64.b64decode(record["data"])
            if record["type"] == "private":
                obj = serialization.load_der_private_key(der, None)
                return obj if private else obj.public_key()
            if private:
                raise _error("A public key cannot sign", "TypeError")
            return serialization.load_der_public_key(der)
        if "pem" in spec:
            text = str(spec["pem"]).encode()
            if b"PRIVATE KEY" in text:
                obj = serialization.load_pem_private_key(text, None)
                return obj if private else obj.public_key()
            if private:
                raise _error("A public key cannot sign", "TypeError")
            return serialization.load_pem_public_key(text)
        if "der" in spec:
            der = base64.b64decode(spec["der"])
            if spec.get("type") == "spki" or (spec.get("type") == "pkcs1" and not private):
                if private:
                    raise _error("A public key cannot sign", "TypeError")
                # (load_der_public_key reads PKCS #1 RSA public keys too)
                return serialization.load_der_public_key(der)
            obj = serialization.load_der_private_key(der, None)
            return obj if private else obj.public_key()
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise _error(f"Invalid key: {error}") from None
    raise _error("Unsupported key argument", "TypeError")


def _rsa_padding(spec: dict[str, Any], digest: hashes.HashAlgorithm, signing: bool) -> Any:
    if spec.get("padding") == RSA_PKCS1_PSS_PADDING:
        salt = spec.get("saltLength")
        if salt is None or salt == RSA_PSS_SALTLEN_MAX_SIGN:
            length: Any = rsa_padding.PSS.MAX_LENGTH if signing else rsa_padding.PSS.AUTO
        elif salt == RSA_PSS_SALTLEN_DIGEST:
            length = rsa_padding.PSS.DIGEST_LENGTH
        else:
            length = int(salt)
        return rsa_padding.PSS(mgf=rsa_padding.MGF1(digest), salt_length=length)
    return rsa_padding.PKCS1v15()


def sign(message: dict[str, Any]) -> str:
    spec = dict(message["key"])
    obj = _load(spec, private=True)
    data = _bytes(message, "data")
    algorithm = message.get("algorithm")
    if isinstance(obj, ed25519.Ed25519PrivateKey):
        signature = obj.sign(data)
    elif isinstance(obj, rsa.RSAPrivateKey):
        digest = _hash(algorithm or "sha256")
        signature = obj.sign(data, _rsa_padding(spec, digest, True), digest)
    elif isinstance(obj, ec.EllipticCurvePrivateKey):
        der = obj.sign(data, ec.ECDSA(_hash(algorithm or "sha256")))
        if spec.get("dsaEncoding") == "ieee-p1363":
            r, s = decode_dss_signature(der)
            size = (obj.curve.key_size + 7) // 8
            der = r.to_bytes(size, "big") + s.to_bytes(size, "big")
        signature = der
    else:
        raise _error("This key type cannot sign", "TypeError")
    return base64.b64encode(signature).decode("ascii")


def verify(message: dict[str, Any]) -> bool:
    spec = dict(message["key"])
    obj = _load(spec, private=False)
    data = _bytes(message, "data")
    signature = _bytes(message, "signature")
    algorithm = message.get("algorithm")
    try:
        if isinstance(obj, ed25519.Ed25519PublicKey):
            obj.verify(signature, data)
        elif isinstance(obj, rsa.RSAPublicKey):
            digest = _hash(algorithm or "sha256")
            obj.verify(signature, data, _rsa_padding(spec, digest, False), digest)
        elif isinstance(obj, ec.EllipticCurvePublicKey):
            if spec.get("dsaEncoding") == "ieee-p1363":
                size = (obj.curve.key_size + 7) // 8
                if len(signature) != 2 * size:
                    return False
                signature = encode_dss_signature(
                    int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
                )
            obj.verify(signature, data, ec.ECDSA(_hash(algorithm or "sha256")))
        else:
            raise _error("This key type cannot verify", "TypeError")
    except (InvalidSignature, ValueError):
        return False
    return True


def generate_key_pair(message: dict[str, Any]) -> dict[str, Any]:
    kind = str(message.get("type"))
    options = dict(message.get("options") or {})
    algorithm: dict[str, Any]
    if kind in ("rsa", "rsa-pss"):
        bits = int(options.get("modulusLength") or 0)
        exponent = int(options.get("publicExponent") or 65537)
        if bits < 512:
            raise _error('The "options.modulusLength" property must be at least 512', "RangeError")
        private_obj: Any = rsa.generate_private_key(public_exponent=exponent, key_size=bits)
        algorithm = {
            "name": "RSA-PSS" if kind == "rsa-pss" else "RSASSA-PKCS1-v1_5",
            "modulusLength": bits,
            "publicExponent": {"$u8": base64.b64encode(int_bytes(exponent)).decode()},
            "hash": {"name": "SHA-256"},
        }
        usages = (["sign"], ["verify"])
    elif kind == "ec":
        curve = _NODE_CURVES.get(str(options.get("namedCurve")))
        if curve is None:
            raise _error(f"Invalid EC curve name: {options.get('namedCurve')}", "TypeError")
        private_obj = ec.generate_private_key(CURVES[curve]())
        algorithm = {"name": "ECDSA", "namedCurve": curve}
        usages = (["sign"], ["verify"])
    elif kind == "ed25519":
        private_obj = ed25519.Ed25519PrivateKey.generate()
        algorithm = {"name": "Ed25519"}
        usages = (["sign"], ["verify"])
    elif kind == "x25519":
        private_obj = x25519.X25519PrivateKey.generate()
        algorithm = {"name": "X25519"}
        usages = (["deriveBits", "deriveKey"], [])
    else:
        raise _error(
            f"celld: generateKeyPair provides rsa, rsa-pss, ec, ed25519 and x25519, not {kind!r}",
            "TypeError",
        )
    return {
        "privateKey": _encode(
            private_obj, algorithm, usages[0], options.get("privateKeyEncoding"), True
        ),
        "publicKey": _encode(
            private_obj.public_key(), algorithm, usages[1], options.get("publicKeyEncoding"), False
        ),
    }


def _encode(
    obj: Any, algorithm: dict[str, Any], usages: list[str], encoding: Any, private: bool
) -> dict[str, Any]:
    if not encoding:
        der = (
            obj.private_bytes(
                serialization.Encoding.DER,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            if private
            else obj.public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        record = Key("private" if private else "public", True, {}, usages, der).to_wire()["$k"]
        record["algorithm"] = algorithm
        return {"record": record}
    spec = dict(encoding)
    form = spec.get("format", "pem")
    if spec.get("cipher") or spec.get("passphrase"):
        raise _error("celld: generateKeyPair does not encrypt private keys", "TypeError")
    if form == "jwk":
        return {"value": _jwk(obj, private)}
    encoding_ = serialization.Encoding.PEM if form == "pem" else serialization.Encoding.DER
    kind = spec.get("type")
    if private:
        formats = {
            "pkcs8": serialization.PrivateFormat.PKCS8,
            "pkcs1": serialization.PrivateFormat.TraditionalOpenSSL,
            "sec1": serialization.PrivateFormat.TraditionalOpenSSL,
        }
        if kind not in formats:
            raise _error(f"Invalid privateKeyEncoding type: {kind}", "TypeError")
        data = obj.private_bytes(encoding_, formats[kind], serialization.NoEncryption())
    else:
        public_formats = {
            "spki": serialization.PublicFormat.SubjectPublicKeyInfo,
            "pkcs1": serialization.PublicFormat.PKCS1,
        }
        if kind not in public_formats:
            raise _error(f"Invalid publicKeyEncoding type: {kind}", "TypeError")
        data = obj.public_bytes(encoding_, public_formats[kind])
    if form == "pem":
        return {"value": data.decode("ascii")}
    return {"der": base64.b64encode(data).decode("ascii")}


def _jwk(obj: Any, private: bool) -> dict[str, Any]:
    public_obj = obj.public_key() if private else obj
    if isinstance(public_obj, rsa.RSAPublicKey):
        numbers = public_obj.public_numbers()
        jwk = {"kty": "RSA", "n": b64url(int_bytes(numbers.n)), "e": b64url(int_bytes(numbers.e))}
        if private:
            p = obj.private_numbers()
            jwk.update(
                d=b64url(int_bytes(p.d)),
                p=b64url(int_bytes(p.p)),
                q=b64url(int_bytes(p.q)),
                dp=b64url(int_bytes(p.dmp1)),
                dq=b64url(int_bytes(p.dmq1)),
                qi=b64url(int_bytes(p.iqmp)),
            )
        return jwk
    if isinstance(public_obj, ec.EllipticCurvePublicKey):
        curve = next(n for n, c in CURVES.items() if c.name == public_obj.curve.name)
        size = CURVE_BYTES[curve]
        numbers = public_obj.public_numbers()
        jwk = {
            "kty": "EC",
            "crv": curve,
            "x": b64url(int_bytes(numbers.x, size)),
            "y": b64url(int_bytes(numbers.y, size)),
        }
        if private:
            jwk["d"] = b64url(int_bytes(obj.private_numbers().private_value, size))
        return jwk
    raw = public_obj.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    crv = "Ed25519" if isinstance(public_obj, ed25519.Ed25519PublicKey) else "X25519"
    jwk = {"kty": "OKP", "crv": crv, "x": b64url(raw)}
    if private:
        jwk["d"] = b64url(
            obj.private_bytes(
                serialization.Encoding.Raw,
                serialization.PrivateFormat.Raw,
                serialization.NoEncryption(),
            )
        )
    return jwk


_METHODS = {
    "pbkdf2": pbkdf2,
    "hkdf": hkdf,
    "scrypt": scrypt,
    "sign": sign,
    "verify": verify,
    "generateKeyPair": generate_key_pair,
}


async def op_nodecrypto(message: dict[str, Any]) -> Any:
    """The `nodecrypto` host operation: {method, ...fields}."""
    method = _METHODS.get(str(message.get("method")))
    if method is None:
        raise _error(f"node:crypto has no host method {message.get('method')!r}", "TypeError")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), method, message)
