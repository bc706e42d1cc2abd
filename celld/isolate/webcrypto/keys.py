"""CryptoKeys made, read and written: generateKey, importKey and exportKey on `cryptography`.

Every key leaves here as a `Key` record whose material is in one canonical form (raw bytes
for a secret key, PKCS #8 DER for a private key, SubjectPublicKeyInfo DER for a public
one), whatever format it came in, so the operations read one format per key type.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa, x25519

from celld.isolate.webcrypto.algorithms import (
    AES,
    BLOCK_BITS,
    EC,
    KDF,
    OKP,
    RSA,
    USAGES,
    hash_name,
    integer,
    member,
)
from celld.isolate.webcrypto.errors import (
    data_error,
    invalid_access,
    not_supported,
    operation_error,
    syntax_error,
    type_error,
)
from celld.isolate.webcrypto.wire import Key, to_bytes

KEY_USAGES = frozenset(
    {"encrypt", "decrypt", "sign", "verify", "deriveKey", "deriveBits", "wrapKey", "unwrapKey"}
)

CURVES: dict[str, type[ec.EllipticCurve]] = {
    "P-256": ec.SECP256R1,
    "P-384": ec.SECP384R1,
    "P-521": ec.SECP521R1,
}
CURVE_BYTES = {"P-256": 32, "P-384": 48, "P-521": 66}
_CURVE_NAMES = {cls.name: name for name, cls in CURVES.items()}

#: JWK `alg` values per algorithm, by hash (RSA, HMAC) or key length (AES).
_JWK_RSA_ALG = {
    "RSASSA-PKCS1-v1_5": {
        "SHA-1": "RS1",
        "SHA-256": "RS256",
        "SHA-384": "RS384",
        "SHA-512": "RS512",
    },
    "RSA-PSS": {"SHA-1": "PS1", "SHA-256": "PS256", "SHA-384": "PS384", "SHA-512": "PS512"},
    "RSA-OAEP": {
        "SHA-1": "RSA-OAEP",
        "SHA-256": "RSA-OAEP-256",
        "SHA-384": "RSA-OAEP-384",
        "SHA-512": "RSA-OAEP-512",
    },
}
_JWK_HMAC_ALG = {"SHA-1": "HS1", "SHA-256": "HS256", "SHA-384": "HS384", "SHA-512": "HS512"}
_JWK_AES_SUFFIX = {"AES-CTR": "CTR", "AES-CBC": "CBC", "AES-GCM": "GCM", "AES-KW": "KW"}
_SIGNING = frozenset({"HMAC", "RSASSA-PKCS1-v1_5", "RSA-PSS", "ECDSA", "Ed25519"})

PRIVATE_DER = (serialization.Encoding.DER, serialization.PrivateFormat.PKCS8)
PUBLIC_DER = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


# -- helpers -------------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def from_b64url(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise data_error(f"JWK member {what} is missing or not a string")
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (ValueError, TypeError):
        raise data_error(f"JWK member {what} is not base64url") from None


def int_bytes(value: int, size: int | None = None) -> bytes:
    length = size if size is not None else max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(length, "big")


def _b64url_int(value: Any, what: str) -> int:
    return int.from_bytes(from_b64url(value, what), "big")


def check_usages(name: str, key_type: str, usages: list[Any]) -> list[str]:
    """The usages as given, deduplicated; a SyntaxError for one this key cannot have."""
    result: list[str] = []
    for usage in usages:
        if usage not in KEY_USAGES:
            raise type_error(f"{usage!r} is not a valid key usage")
        if usage not in result:
            result.append(usage)
    private, public = USAGES[name]
    allowed = public if key_type == "public" else private
    for usage in result:
        if usage not in allowed:
            raise syntax_error(
                f'Attempt to import {key_type} {name} key with invalid usage "{usage}".'
            )
    return result


def require_usages(key: Key) -> Key:
    if key.type in ("secret", "private") and not key.usages:
        raise syntax_error("Secret/private CryptoKeys must have at least one usage.")
    return key


def private_key(key: Key) -> Any:
    """The `cryptography` object of a private key record (validated when it was made)."""
    return serialization.load_der_private_key(key.data, None, unsafe_skip_rsa_key_validation=True)


def public_key(key: Key) -> Any:
    return serialization.load_der_public_key(key.data)


def _public_der(obj: Any) -> bytes:
    return obj.public_bytes(*PUBLIC_DER)


def _private_der(obj: Any) -> bytes:
    return obj.private_bytes(*PRIVATE_DER, serialization.NoEncryption())


# -- generateKey ---------------------------------------------------------------------------


def generate_key(
    params: dict[str, Any], extractable: bool, usages: list[Any]
) -> Key | tuple[Key, Key]:
    """A new secret key or (public, private) pair."""
    name = params["name"]
    if name in AES:
        length = integer(params, "length")
        if length not in (128, 192, 256):
            raise operation_error("AES key length must be 128, 192 or 256 bits")
        key = Key(
            "secret", extractable, {"name": name, "length": length}, [], os.urandom(length // 8)
        )
        key.usages = check_usages(name, "secret", usages)
        return require_usages(key)
    if name == "HMAC":
        hash_ = hash_name(params.get("hash"))
        length = (
            integer(params, "length") if params.get("length") is not None else BLOCK_BITS[hash_]
        )
        if length == 0:
            raise operation_error("HMAC key length must not be zero")
        data = bytearray(os.urandom((length + 7) // 8))
        if length % 8:
            data[-1] &= (0xFF << (8 - length % 8)) & 0xFF
        algorithm = {"name": name, "hash": {"name": hash_}, "length": length}
        key = Key(
            "secret", extractable, algorithm, check_usages(name, "secret", usages), bytes(data)
        )
        return require_usages(key)
    if name in RSA:
        hash_ = hash_name(params.get("hash"))
        bits = integer(params, "modulusLength")
        exponent = int.from_bytes(to_bytes(params.get("publicExponent"), "publicExponent"), "big")
        if exponent not in (3, 65537):
            raise operation_error("The RSA public exponent must be 3 or 65537")
        if bits < 512 or bits % 8:
            raise operation_error("The RSA modulus length must be a multiple of 8, at least 512")
        try:
            private_obj = rsa.generate_private_key(public_exponent=exponent, key_size=bits)
        except ValueError as error:
            raise operation_error(f"RSA key generation failed: {error}") from None
        algorithm = {
            "name": name,
            "modulusLength": bits,
            "publicExponent": int_bytes(exponent),
            "hash": {"name": hash_},
        }
        return _pair(name, algorithm, private_obj, extractable, usages)
    if name in EC:
        curve = _curve(params)
        private_obj = ec.generate_private_key(CURVES[curve]())
        return _pair(name, {"name": name, "namedCurve": curve}, private_obj, extractable, usages)
    if name in OKP:
        generator = ed25519.Ed25519PrivateKey if name == "Ed25519" else x25519.X25519PrivateKey
        return _pair(name, {"name": name}, generator.generate(), extractable, usages)
    raise not_supported(f"generateKey does not provide {name}")


def _pair(
    name: str, algorithm: dict[str, Any], private_obj: Any, extractable: bool, usages: list[Any]
) -> tuple[Key, Key]:
    private_allowed, public_allowed = USAGES[name]
    wanted = []
    for usage in usages:
        if usage not in KEY_USAGES:
            raise type_error(f"{usage!r} is not a valid key usage")
        if usage not in private_allowed | public_allowed:
            raise syntax_error(f"Unsupported key usage for a {name} key: {usage}")
        if usage not in wanted:
            wanted.append(usage)
    private = Key(
        "private",
        extractable,
        algorithm,
        [u for u in wanted if u in private_allowed],
        _private_der(private_obj),
    )
    public = Key(
        "public",
        True,
        dict(algorithm),
        [u for u in wanted if u in public_allowed],
        _public_der(private_obj.public_key()),
    )
    require_usages(private)
    return public, private


def _curve(params: dict[str, Any]) -> str:
    curve = member(params, "namedCurve", str)
    if curve not in CURVES:
        raise not_supported(f"Unrecognized or unimplemented EC curve {curve!r}")
    return curve


# -- importKey -----------------------------------------------------------------------------


def import_key(
    format_: str, data: Any, params: dict[str, Any], extractable: bool, usages: list[Any]
) -> Key:
    """A key from `data` in `format_` ("raw", "pkcs8", "spki" or "jwk")."""
    name = params["name"]
    if format_ not in ("raw", "pkcs8", "spki", "jwk"):
        raise type_error(f"{format_!r} is not a valid key format")
    if format_ == "jwk":
        if not isinstance(data, dict) or "$b" in data:
            raise type_error("importKey: a JWK must be an object")
        key = _import_jwk(data, params, extractable, usages)
    else:
        raw = to_bytes(data, "keyData")
        if name in AES or name == "HMAC" or name in KDF:
            key = _import_secret(format_, raw, params, extractable, usages)
        else:
            key = _import_asymmetric(format_, raw, params, extractable, usages)
    return require_usages(key)


def _import_secret(
    format_: str, raw: bytes, params: dict[str, Any], extractable: bool, usages: list[Any]
) -> Key:
    name = params["name"]
    if format_ != "raw":
        raise not_supported(f"{name} keys can only be imported as raw or jwk, not {format_}")
    if name in KDF:
        if extractable:
            raise syntax_error(f"{name} key cannot be extractable.")
        return Key("secret", False, {"name": name}, check_usages(name, "secret", usages), raw)
    if name in AES:
        if len(raw) not in (16, 24, 32):
            raise data_error(
                "Imported AES key length must be 128, 192, or 256 bits but provided"
                f" {len(raw) * 8}."
            )
        algorithm = {"name": name, "length": len(raw) * 8}
        return Key("secret", extractable, algorithm, check_usages(name, "secret", usages), raw)
    return _hmac_key(raw, params, extractable, usages)


def _hmac_key(raw: bytes, params: dict[str, Any], extractable: bool, usages: list[Any]) -> Key:
    hash_ = hash_name(params.get("hash"))
    if not raw:
        raise data_error("HMAC key data must not be empty")
    length = len(raw) * 8
    if params.get("length") is not None:
        given = integer(params, "length")
        if given > length or given <= length - 8 or given == 0:
            raise data_error(f"HMAC key length {given} does not match its {length}-bit data")
        length = given
    algorithm = {"name": "HMAC", "hash": {"name": hash_}, "length": length}
    return Key("secret", extractable, algorithm, check_usages("HMAC", "secret", usages), raw)


def _import_asymmetric(
    format_: str, raw: bytes, params: dict[str, Any], extractable: bool, usages: list[Any]
) -> Key:
    name = params["name"]
    algorithm = _asymmetric_algorithm(params)
    if format_ == "raw":
        if name in EC:
            curve = algorithm["namedCurve"]
            try:
                obj: Any = ec.EllipticCurvePublicKey.from_encoded_point(CURVES[curve](), raw)
            except ValueError:
                raise data_error(f"Invalid raw {curve} public key") from None
        elif name in OKP:
            loader = ed25519.Ed25519PublicKey if name == "Ed25519" else x25519.X25519PublicKey
            try:
                obj = loader.from_public_bytes(raw)
            except ValueError:
                raise data_error(f"Invalid raw {name} public key") from None
        else:
            raise not_supported(f"{name} keys cannot be imported as raw")
        return _public_record(name, algorithm, obj, usages)
    if format_ == "spki":
        try:
            obj = serialization.load_der_public_key(raw)
        except (ValueError, UnsupportedAlgorithm):
            raise data_error("Invalid SubjectPublicKeyInfo key data") from None
        algorithm = _check_kind(name, algorithm, obj)
        return _public_record(name, algorithm, obj, usages)
    try:
        obj = serialization.load_der_private_key(raw, None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise data_error("Invalid PKCS8 key data") from None
    algorithm = _check_kind(name, algorithm, obj)
    return Key(
        "private",
        extractable,
        algorithm,
        check_usages(name, "private", usages),
        _private_der(obj),
    )


def _public_record(name: str, algorithm: dict[str, Any], obj: Any, usages: list[Any]) -> Key:
    # A public key is always extractable (Web Crypto's rule for imports of public keys).
    return Key("public", True, algorithm, check_usages(name, "public", usages), _public_der(obj))


def _asymmetric_algorithm(params: dict[str, Any]) -> dict[str, Any]:
    name = params["name"]
    if name in RSA:
        return {"name": name, "hash": {"name": hash_name(params.get("hash"))}}
    if name in EC:
        return {"name": name, "namedCurve": _curve(params)}
    return {"name": name}


def _check_kind(name: str, algorithm: dict[str, Any], obj: Any) -> dict[str, Any]:
    """The key object is of the algorithm's kind (and curve); RSA gains its size fields."""
    if name in RSA:
        if not isinstance(obj, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
            raise data_error(f"The key is not an RSA key (importing for {name})")
        numbers = (
            obj.public_key().public_numbers()
            if hasattr(obj, "private_numbers")
            else (obj.public_numbers())
        )
        return {
            "name": name,
            "modulusLength": obj.key_size,
            "publicExponent": int_bytes(numbers.e),
            "hash": algorithm["hash"],
        }
    if name in EC:
        if not isinstance(obj, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
            raise data_error(f"The key is not an EC key (importing for {name})")
        curve = _CURVE_NAMES.get(obj.curve.name)
        if curve != algorithm["namedCurve"]:
            raise data_error(f"The key's curve ({curve}) is not {algorithm['namedCurve']}")
        return algorithm
    kinds = {
        "Ed25519": (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey),
        "X25519": (x25519.X25519PrivateKey, x25519.X25519PublicKey),
    }
    if not isinstance(obj, kinds[name]):
        raise data_error(f"The key is not an {name} key")
    return algorithm


def _import_jwk(
    jwk: dict[str, Any], params: dict[str, Any], extractable: bool, usages: list[Any]
) -> Key:
    name = params["name"]
    kty = jwk.get("kty")
    if jwk.get("ext") is False and extractable:
        raise data_error("The JWK's ext is false but an extractable key was asked for")
    key_ops = jwk.get("key_ops")
    if key_ops is not None and (
        not isinstance(key_ops, list) or any(u not in key_ops for u in usages)
    ):
        raise data_error("The JWK's key_ops do not include every requested usage")
    use = jwk.get("use")
    if use is not None and usages:
        expected = "sig" if name in _SIGNING else "enc"
        if use != expected:
            raise data_error(f"The JWK's use must be {expected!r} for {name}, not {use!r}")
    alg = jwk.get("alg")
    if name in AES or name == "HMAC" or name in KDF:
        if kty != "oct":
            raise data_error(f"A JWK for {name} must have kty 'oct', not {kty!r}")
        if name in KDF:
            raise not_supported(f"{name} keys can only be imported as raw")
        raw = from_b64url(jwk.get("k"), "k")
        if name in AES:
            expected_alg = f"A{len(raw) * 8}{_JWK_AES_SUFFIX[name]}"
            if alg is not None and alg != expected_alg:
                raise data_error(f"The JWK's alg {alg!r} does not match {name} ({expected_alg})")
            return _import_secret("raw", raw, params, extractable, usages)
        key = _hmac_key(raw, params, extractable, usages)
        expected_alg = _JWK_HMAC_ALG[key.algorithm["hash"]["name"]]
        if alg is not None and alg != expected_alg:
            raise data_error(f"The JWK's alg {alg!r} does not match HMAC ({expected_alg})")
        return key
    algorithm = _asymmetric_algorithm(params)
    private = "d" in jwk
    if name in RSA:
        if kty != "RSA":
            raise data_error(f"A JWK for {name} must have kty 'RSA', not {kty!r}")
        expected_alg = _JWK_RSA_ALG[name][algorithm["hash"]["name"]]
        if alg is not None and alg != expected_alg:
            raise data_error(f"The JWK's alg {alg!r} does not match {name} ({expected_alg})")
        obj = _rsa_from_jwk(jwk, private)
    elif name in EC:
        if kty != "EC":
            raise data_error(f"A JWK for {name} must have kty 'EC', not {kty!r}")
        curve = algorithm["namedCurve"]
        if jwk.get("crv") != curve:
            # workerd reads the coordinates on the curve asked for, and they are not on it.
            raise operation_error(
                f'Invalid EC key; the JWK\'s crv "{jwk.get("crv")}" is not {curve}.'
            )
        obj = _ec_from_jwk(jwk, curve, private)
    else:
        if kty != "OKP":
            raise data_error(f"A JWK for {name} must have kty 'OKP', not {kty!r}")
        if jwk.get("crv") != name:
            raise data_error(f"The JWK's crv {jwk.get('crv')!r} is not {name}")
        obj = _okp_from_jwk(jwk, name, private)
    algorithm = _check_kind(name, algorithm, obj)
    if private:
        return Key(
            "private",
            extractable,
            algorithm,
            check_usages(name, "private", usages),
            _private_der(obj),
        )
    return _public_record(name, algorithm, obj, usages)


def _rsa_from_jwk(jwk: dict[str, Any], private: bool) -> Any:
    n, e = _b64url_int(jwk.get("n"), "n"), _b64url_int(jwk.get("e"), "e")
    public_numbers = rsa.RSAPublicNumbers(e, n)
    try:
        if not private:
            return public_numbers.public_key()
        d = _b64url_int(jwk.get("d"), "d")
        if "p" in jwk:
            p, q = _b64url_int(jwk.get("p"), "p"), _b64url_int(jwk.get("q"), "q")
            dp, dq = _b64url_int(jwk.get("dp"), "dp"), _b64url_int(jwk.get("dq"), "dq")
            qi = _b64url_int(jwk.get("qi"), "qi")
        else:
            p, q = rsa.rsa_recover_prime_factors(n, e, d)
            dp, dq, qi = rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q)
        return rsa.RSAPrivateNumbers(p, q, d, dp, dq, qi, public_numbers).private_key()
    except ValueError as error:
        raise data_error(f"Invalid RSA JWK: {error}") from None


def _ec_from_jwk(jwk: dict[str, Any], curve: str, private: bool) -> Any:
    size = CURVE_BYTES[curve]
    x, y = from_b64url(jwk.get("x"), "x"), from_b64url(jwk.get("y"), "y")
    if len(x) != size or len(y) != size:
        raise data_error(f"The JWK's x and y must be {size} bytes for {curve}")
    try:
        public_numbers = ec.EllipticCurvePublicNumbers(
            int.from_bytes(x, "big"), int.from_bytes(y, "big"), CURVES[curve]()
        )
        if not private:
            return public_numbers.public_key()
        d = from_b64url(jwk.get("d"), "d")
        if len(d) != size:
            raise data_error(f"The JWK's d must be {size} bytes for {curve}")
        obj = ec.derive_private_key(int.from_bytes(d, "big"), CURVES[curve]())
    except ValueError as error:
        raise data_error(f"Invalid EC JWK: {error}") from None
    if obj.public_key().public_numbers() != public_numbers:
        raise data_error("The JWK's d does not belong to its x and y")
    return obj


def _okp_from_jwk(jwk: dict[str, Any], name: str, private: bool) -> Any:
    x = from_b64url(jwk.get("x"), "x")
    try:
        if not private:
            loader = ed25519.Ed25519PublicKey if name == "Ed25519" else x25519.X25519PublicKey
            return loader.from_public_bytes(x)
        d = from_b64url(jwk.get("d"), "d")
        maker = ed25519.Ed25519PrivateKey if name == "Ed25519" else x25519.X25519PrivateKey
        obj = maker.from_private_bytes(d)
    except ValueError as error:
        raise data_error(f"Invalid {name} JWK: {error}") from None
    raw = obj.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    if raw != x:
        raise data_error("The JWK's d does not belong to its x")
    return obj


# -- exportKey -----------------------------------------------------------------------------


def export_key(format_: str, key: Key) -> bytes | dict[str, Any]:
    """The key in `format_`: bytes, or a JWK dictionary."""
    if format_ not in ("raw", "pkcs8", "spki", "jwk"):
        raise type_error(f"{format_!r} is not a valid key format")
    if not key.extractable:
        raise invalid_access(f"Attempt to export non-extractable {key.name} key.")
    name = key.name
    if name in KDF:
        raise not_supported(f"{name} keys cannot be exported")
    if format_ == "jwk":
        return _export_jwk(key)
    if key.type == "secret":
        if format_ != "raw":
            raise invalid_access(f"A secret key can only be exported as raw or jwk, not {format_}")
        return key.data
    if format_ == "pkcs8":
        if key.type != "private":
            raise invalid_access("Only a private key can be exported as pkcs8")
        return key.data
    if key.type != "public":
        raise invalid_access(f"Only a public key can be exported as {format_}")
    if format_ == "spki":
        return key.data
    if name in RSA:
        raise invalid_access(f'Cannot export "{name}" in "raw" format.')
    obj = public_key(key)
    if name in EC:
        return obj.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
    return obj.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _export_jwk(key: Key) -> dict[str, Any]:
    name = key.name
    jwk: dict[str, Any]
    if key.type == "secret":
        jwk = {"kty": "oct", "k": b64url(key.data)}
        if name == "HMAC":
            jwk["alg"] = _JWK_HMAC_ALG[key.algorithm["hash"]["name"]]
        else:
            jwk["alg"] = f"A{len(key.data) * 8}{_JWK_AES_SUFFIX[name]}"
    else:
        obj = private_key(key) if key.type == "private" else public_key(key)
        public_obj = obj.public_key() if key.type == "private" else obj
        if name in RSA:
            numbers = public_obj.public_numbers()
            jwk = {
                "kty": "RSA",
                "alg": _JWK_RSA_ALG[name][key.algorithm["hash"]["name"]],
                "n": b64url(int_bytes(numbers.n)),
                "e": b64url(int_bytes(numbers.e)),
            }
            if key.type == "private":
                private = obj.private_numbers()
                for member_name, value in (
                    ("d", private.d),
                    ("p", private.p),
                    ("q", private.q),
                    ("dp", private.dmp1),
                    ("dq", private.dmq1),
                    ("qi", private.iqmp),
                ):
                    jwk[member_name] = b64url(int_bytes(value))
        elif name in EC:
            curve = key.algorithm["namedCurve"]
            size = CURVE_BYTES[curve]
            numbers = public_obj.public_numbers()
            jwk = {
                "kty": "EC",
                "crv": curve,
                "x": b64url(int_bytes(numbers.x, size)),
                "y": b64url(int_bytes(numbers.y, size)),
            }
            if key.type == "private":
                jwk["d"] = b64url(int_bytes(obj.private_numbers().private_value, size))
        else:
            raw = public_obj.public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            )
            jwk = {"kty": "OKP", "crv": name, "x": b64url(raw)}
            if name == "Ed25519":
                jwk["alg"] = "EdDSA"
            if key.type == "private":
                jwk["d"] = b64url(
                    obj.private_bytes(
                        serialization.Encoding.Raw,
                        serialization.PrivateFormat.Raw,
                        serialization.NoEncryption(),
                    )
                )
    jwk["key_ops"] = list(key.usages)
    jwk["ext"] = key.extractable
    return jwk


def key_length(params: dict[str, Any]) -> int | None:
    """Web Crypto's "get key length" of a derived key's algorithm (deriveKey)."""
    name = params["name"]
    if name in AES:
        length = integer(params, "length")
        if length not in (128, 192, 256):
            raise operation_error("AES key length must be 128, 192 or 256 bits")
        return length
    if name == "HMAC":
        hash_ = hash_name(params.get("hash"))
        if params.get("length") is not None:
            length = integer(params, "length")
            if length == 0:
                raise type_error("HMAC key length must not be zero")
            return length
        return BLOCK_BITS[hash_]
    return None
