# ruff: noqa: E501 - the vectors and JS snippets read better unwrapped
"""crypto.subtle against published known answers, one algorithm per test, in a real
isolate with the full runtime and the host's `subtle` operation.

Vectors: RFC 4231/2202 (HMAC), NIST GCM spec and SP 800-38A (AES-GCM, CBC, CTR), RFC 3394
(AES-KW), RFC 6070 (PBKDF2), RFC 5869 (HKDF), RFC 6979 (ECDSA P-256), RFC 5903 (ECDH
P-256), RFC 7748 (X25519), RFC 8032 (Ed25519), and RSA outputs of the OpenSSL command line
(tests/fixtures/webcrypto-rsa2048.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.jsharness import run_js_async

PRELUDE = """
const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s) => new Uint8Array(s.match(/../g).map((h) => parseInt(h, 16)));
const utf8 = (s) => new TextEncoder().encode(s);
const b64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const subtle = crypto.subtle;
const fail = async (promise) => { try { await promise; return null; } catch (e) { return [e.name, e instanceof DOMException]; } };
"""

RSA = json.loads((Path(__file__).parent / "fixtures" / "webcrypto-rsa2048.json").read_text())


async def js(body: str) -> Any:
    return await run_js_async(PRELUDE + body, timeout=60)


async def test_hmac_rfc4231_and_rfc2202() -> None:
    result = await js(
        """
        const out = {};
        for (const hash of ["SHA-1", "SHA-256", "SHA-384", "SHA-512"]) {
          const key = await subtle.importKey("raw", utf8("Jefe"), {name: "HMAC", hash}, false, ["sign", "verify"]);
          const mac = await subtle.sign("HMAC", key, utf8("what do ya want for nothing?"));
          out[hash] = [hex(mac), await subtle.verify("HMAC", key, mac, utf8("what do ya want for nothing?")),
                       await subtle.verify("HMAC", key, mac, utf8("what do ya want for nothing!"))];
        }
        return out;
        """
    )
    assert result == {
        "SHA-1": ["effcdf6ae5eb2fa2d27416d5f184df9c259a7c79", True, False],
        "SHA-256": [
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            True,
            False,
        ],
        "SHA-384": [
            "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649",
            True,
            False,
        ],
        "SHA-512": [
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
            True,
            False,
        ],
    }


async def test_hmac_key_generation_export_and_jwk() -> None:
    result = await js(
        """
        const key = await subtle.generateKey({name: "HMAC", hash: "SHA-512"}, true, ["sign"]);
        const raw = await subtle.exportKey("raw", key);
        const jwk = await subtle.exportKey("jwk", key);
        const again = await subtle.importKey("jwk", jwk, {name: "HMAC", hash: {name: "SHA-512"}}, true, ["sign"]);
        const sameMac = hex(await subtle.sign("HMAC", key, utf8("x"))) === hex(await subtle.sign("HMAC", again, utf8("x")));
        return {type: key.type, alg: key.algorithm, usages: key.usages, rawBytes: raw.byteLength,
                jwk: [jwk.kty, jwk.alg, jwk.ext, jwk.key_ops], sameMac,
                cached: key.algorithm === key.algorithm && key.usages === key.usages,
                wrongAlg: await fail(subtle.importKey("jwk", {...jwk, alg: "HS256"}, {name: "HMAC", hash: "SHA-512"}, true, ["sign"])),
                empty: await fail(subtle.importKey("raw", new Uint8Array(0), {name: "HMAC", hash: "SHA-256"}, true, ["sign"])),
                badUsage: await fail(subtle.importKey("raw", raw, {name: "HMAC", hash: "SHA-256"}, true, ["encrypt"])),
                noUsage: await fail(subtle.generateKey({name: "HMAC", hash: "SHA-256"}, true, []))};
        """
    )
    assert result["type"] == "secret"
    assert result["alg"] == {"name": "HMAC", "hash": {"name": "SHA-512"}, "length": 1024}
    assert result["usages"] == ["sign"]
    assert result["rawBytes"] == 128
    assert result["jwk"] == ["oct", "HS512", True, ["sign"]]
    assert result["sameMac"] is True
    assert result["cached"] is True
    assert result["wrongAlg"] == ["DataError", True]
    assert result["empty"] == ["DataError", True]
    assert result["badUsage"] == ["SyntaxError", True]
    assert result["noUsage"] == ["SyntaxError", True]


async def test_aes_gcm_nist_test_cases() -> None:
    result = await js(
        """
        const k0 = await subtle.importKey("raw", new Uint8Array(16), "AES-GCM", false, ["encrypt", "decrypt"]);
        const case2 = hex(await subtle.encrypt({name: "AES-GCM", iv: new Uint8Array(12)}, k0, new Uint8Array(16)));
        const key = await subtle.importKey("raw", unhex("feffe9928665731c6d6a8f9467308308"), {name: "AES-GCM"}, true, ["encrypt", "decrypt"]);
        const params = {name: "AES-GCM", iv: unhex("cafebabefacedbaddecaf888"), additionalData: unhex("feedfacedeadbeeffeedfacedeadbeefabaddad2")};
        const plain = unhex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39");
        const sealed = await subtle.encrypt(params, key, plain);
        const opened = hex(await subtle.decrypt(params, key, sealed));
        const short = await subtle.encrypt({...params, tagLength: 96}, key, plain);
        const tampered = new Uint8Array(sealed).slice(); tampered[0] ^= 1;
        return {case2, case4: hex(sealed), opened, shortLen: short.byteLength - plain.length,
                shortOpen: hex(await subtle.decrypt({...params, tagLength: 96}, key, short)) === hex(plain),
                tampered: await fail(subtle.decrypt(params, key, tampered)),
                notSigning: await fail(subtle.sign("AES-GCM", key, plain)),
                wrongUsage: await fail(subtle.encrypt(params, await subtle.importKey("raw", new Uint8Array(16), "AES-GCM", false, ["decrypt"]), plain)),
                wrongAlgorithm: await fail(subtle.encrypt({name: "AES-CBC", iv: new Uint8Array(16)}, key, plain)),
                badTag: await fail(subtle.encrypt({...params, tagLength: 100}, key, plain)),
                noIv: await fail(subtle.encrypt({name: "AES-GCM"}, key, plain)),
                jwk: (({alg, kty, k}) => ({alg, kty, k}))(await subtle.exportKey("jwk", key))};
        """
    )
    assert result["case2"] == "0388dace60b6a392f328c2b971b2fe78ab6e47d42cec13bdf53a67b21257bddf"
    assert result["case4"] == (
        "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091"
        "5bc94fbc3221a5db94fae95ae7121a47"
    )
    assert result["opened"].startswith("d9313225")
    assert result["shortLen"] == 12
    assert result["shortOpen"] is True
    assert result["tampered"] == ["OperationError", True]
    assert result["notSigning"] == ["InvalidAccessError", True]
    assert result["wrongUsage"] == ["InvalidAccessError", True]
    assert result["wrongAlgorithm"] == ["InvalidAccessError", True]
    assert result["badTag"] == ["OperationError", True]
    assert result["noIv"] == ["TypeError", False]
    assert result["jwk"] == {"alg": "A128GCM", "kty": "oct", "k": "_v_pkoZlcxxtao-UZzCDCA"}


async def test_aes_cbc_sp800_38a() -> None:
    result = await js(
        """
        const key = await subtle.importKey("raw", unhex("2b7e151628aed2a6abf7158809cf4f3c"), "AES-CBC", false, ["encrypt", "decrypt"]);
        const params = {name: "AES-CBC", iv: unhex("000102030405060708090a0b0c0d0e0f")};
        const plain = unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
        const sealed = await subtle.encrypt(params, key, plain);
        const broken = new Uint8Array(sealed).slice(); broken[broken.length - 1] ^= 0x55;
        return {sealed: hex(sealed), opened: hex(await subtle.decrypt(params, key, sealed)),
                badPad: await fail(subtle.decrypt(params, key, broken)),
                badIv: await fail(subtle.encrypt({name: "AES-CBC", iv: new Uint8Array(8)}, key, plain))};
        """
    )
    # Two blocks of the SP 800-38A F.2.1 vector, then the PKCS #7 padding block.
    assert result["sealed"].startswith(
        "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
    )
    assert len(result["sealed"]) == 96
    assert result["opened"] == "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    assert result["badPad"] == ["OperationError", True]
    assert result["badIv"] == ["OperationError", True]


async def test_aes_ctr_sp800_38a_and_counter_wrap() -> None:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")
    result = await js(
        """
        const key = await subtle.importKey("raw", unhex("2b7e151628aed2a6abf7158809cf4f3c"), "AES-CTR", false, ["encrypt", "decrypt"]);
        const plain = unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
        const full = await subtle.encrypt({name: "AES-CTR", counter: unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"), length: 128}, key, plain);
        const wrapping = await subtle.encrypt({name: "AES-CTR", counter: unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"), length: 8}, key, plain);
        return {full: hex(full), wrapping: hex(wrapping),
                tooLong: await fail(subtle.encrypt({name: "AES-CTR", counter: new Uint8Array(16), length: 1}, key, new Uint8Array(48))),
                zeroLength: await fail(subtle.encrypt({name: "AES-CTR", counter: new Uint8Array(16), length: 0}, key, plain))};
        """
    )
    assert result["full"] == "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
    # With an 8-bit counter the second block's counter is ...fe00, not ...ff00 (no carry).
    ecb = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    stream = ecb.update(bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")) + ecb.update(
        bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfe00")
    )
    plain = bytes.fromhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
    assert result["wrapping"] == bytes(a ^ b for a, b in zip(plain, stream, strict=True)).hex()
    assert result["tooLong"] == ["OperationError", True]
    assert result["zeroLength"] == ["OperationError", True]


async def test_aes_kw_rfc3394_wrap_and_unwrap() -> None:
    result = await js(
        """
        const kek = await subtle.importKey("raw", unhex("000102030405060708090a0b0c0d0e0f"), "AES-KW", false, ["wrapKey", "unwrapKey"]);
        const key = await subtle.importKey("raw", unhex("00112233445566778899aabbccddeeff"), "AES-GCM", true, ["encrypt"]);
        const wrapped = await subtle.wrapKey("raw", key, kek, "AES-KW");
        const back = await subtle.unwrapKey("raw", wrapped, kek, "AES-KW", "AES-GCM", true, ["encrypt"]);
        const corrupt = new Uint8Array(wrapped).slice(); corrupt[3] ^= 1;
        const hidden = await subtle.importKey("raw", new Uint8Array(16), "AES-GCM", false, ["encrypt"]);
        return {wrapped: hex(wrapped), back: hex(await subtle.exportKey("raw", back)), alg: back.algorithm,
                corrupt: await fail(subtle.unwrapKey("raw", corrupt, kek, "AES-KW", "AES-GCM", true, ["encrypt"])),
                notExtractable: await fail(subtle.wrapKey("raw", hidden, kek, "AES-KW")),
                notViaEncrypt: await fail(subtle.encrypt("AES-KW", kek, new Uint8Array(16)))};
        """
    )
    assert result["wrapped"] == "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5"
    assert result["back"] == "00112233445566778899aabbccddeeff"
    assert result["alg"] == {"name": "AES-GCM", "length": 128}
    assert result["corrupt"] == ["OperationError", True]
    assert result["notExtractable"] == ["InvalidAccessError", True]
    # workerd checks the key's usages before what the operation provides.
    assert result["notViaEncrypt"] == ["InvalidAccessError", True]


async def test_pbkdf2_rfc6070_and_derive_key() -> None:
    result = await js(
        """
        const base = await subtle.importKey("raw", utf8("password"), "PBKDF2", false, ["deriveBits", "deriveKey"]);
        const bits = async (hash, c, n) => hex(await subtle.deriveBits({name: "PBKDF2", hash, salt: utf8("salt"), iterations: c}, base, n));
        const aes = await subtle.deriveKey({name: "PBKDF2", hash: "SHA-256", salt: utf8("salt"), iterations: 1}, base,
                                           {name: "AES-GCM", length: 256}, true, ["encrypt"]);
        return {c1: await bits("SHA-1", 1, 160), c2: await bits("SHA-1", 2, 160), s256: await bits("SHA-256", 1, 256),
                derived: hex(await subtle.exportKey("raw", aes)), derivedAlg: aes.algorithm,
                extractable: await fail(subtle.importKey("raw", utf8("p"), "PBKDF2", true, ["deriveBits"])),
                odd: await fail(subtle.deriveBits({name: "PBKDF2", hash: "SHA-1", salt: utf8("salt"), iterations: 1}, base, 12)),
                zeroIterations: await fail(subtle.deriveBits({name: "PBKDF2", hash: "SHA-1", salt: utf8("salt"), iterations: 0}, base, 160)),
                exported: await fail(subtle.exportKey("raw", base))};
        """
    )
    assert result["c1"] == "0c60c80f961f0e71f3a9b524af6012062fe037a6"
    assert result["c2"] == "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957"
    assert result["s256"] == "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b"
    assert result["derived"] == result["s256"]
    assert result["derivedAlg"] == {"name": "AES-GCM", "length": 256}
    assert result["extractable"] == ["SyntaxError", True]
    assert result["odd"] == ["OperationError", True]
    assert result["zeroIterations"] == ["OperationError", True]
    assert result["exported"] == ["InvalidAccessError", True]


async def test_hkdf_rfc5869_case_1() -> None:
    result = await js(
        """
        const ikm = await subtle.importKey("raw", new Uint8Array(22).fill(0x0b), "HKDF", false, ["deriveBits", "deriveKey"]);
        const params = {name: "HKDF", hash: "SHA-256", salt: unhex("000102030405060708090a0b0c"), info: unhex("f0f1f2f3f4f5f6f7f8f9")};
        const hmac = await subtle.deriveKey(params, ikm, {name: "HMAC", hash: "SHA-256", length: 128}, true, ["sign"]);
        return {okm: hex(await subtle.deriveBits(params, ikm, 336)),
                hmac: hex(await subtle.exportKey("raw", hmac)),
                tooMany: await fail(subtle.deriveBits(params, ikm, 255 * 256 + 8)),
                noLength: await fail(subtle.deriveBits(params, ikm, null))};
        """
    )
    okm = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    assert result["okm"] == okm
    assert result["hmac"] == okm[:32]
    assert result["tooMany"] == ["OperationError", True]
    assert result["noLength"] == ["OperationError", True]


async def test_ecdsa_p256_rfc6979_verifies_and_round_trips() -> None:
    result = await js(
        """
        const jwk = {kty: "EC", crv: "P-256",
          x: "YP7UuiVanTHJYet0xjVtaMBJuJI7Yfps5mliLmDyn7Y", y: "eQP-EAi4vJmkGunpVii8ZPLxsgwtfp9Rd6PClNRGIpk",
          d: "ya-p2EW6dRZrXCFXZ7HWk05Qw9s26JsSe4piKxIPZyE"};
        const priv = await subtle.importKey("jwk", jwk, {name: "ECDSA", namedCurve: "P-256"}, true, ["sign"]);
        const {d, ...publicJwk} = jwk;
        const pub = await subtle.importKey("jwk", publicJwk, {name: "ECDSA", namedCurve: "P-256"}, true, ["verify"]);
        const sig = unhex("efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8");
        const alg = {name: "ECDSA", hash: "SHA-256"};
        const mine = await subtle.sign(alg, priv, utf8("sample"));
        const raw = await subtle.exportKey("raw", pub);
        const fromRaw = await subtle.importKey("raw", raw, {name: "ECDSA", namedCurve: "P-256"}, true, ["verify"]);
        const spki = await subtle.exportKey("spki", pub);
        const pkcs8 = await subtle.exportKey("pkcs8", priv);
        const again = await subtle.importKey("pkcs8", pkcs8, {name: "ECDSA", namedCurve: "P-256"}, true, ["sign"]);
        return {known: await subtle.verify(alg, pub, sig, utf8("sample")),
                other: await subtle.verify(alg, pub, sig, utf8("test")),
                mineLen: mine.byteLength, mine: await subtle.verify(alg, fromRaw, mine, utf8("sample")),
                rawHead: hex(raw).slice(0, 10), rawLen: raw.byteLength, spkiLen: spki.byteLength,
                again: (await subtle.exportKey("jwk", again)).d,
                pubType: pub.type, privExtractable: priv.extractable, alg: pub.algorithm,
                wrongCurve: await fail(subtle.importKey("spki", spki, {name: "ECDSA", namedCurve: "P-384"}, true, ["verify"])),
                pubSigns: await fail(subtle.importKey("jwk", publicJwk, {name: "ECDSA", namedCurve: "P-256"}, true, ["sign"])),
                badCurve: await fail(subtle.generateKey({name: "ECDSA", namedCurve: "P-192"}, true, ["sign"])),
                shortSig: await subtle.verify(alg, pub, sig.slice(1), utf8("sample"))};
        """
    )
    assert result["known"] is True
    assert result["other"] is False
    assert result["mineLen"] == 64
    assert result["mine"] is True
    assert result["rawHead"] == "0460fed4ba"
    assert result["rawLen"] == 65
    assert result["spkiLen"] == 91
    assert result["again"] == "ya-p2EW6dRZrXCFXZ7HWk05Qw9s26JsSe4piKxIPZyE"
    assert result["pubType"] == "public"
    assert result["privExtractable"] is True
    assert result["alg"] == {"name": "ECDSA", "namedCurve": "P-256"}
    assert result["wrongCurve"] == ["DataError", True]
    assert result["pubSigns"] == ["SyntaxError", True]
    assert result["badCurve"] == ["NotSupportedError", True]
    assert result["shortSig"] is False


@pytest.mark.parametrize(("curve", "size"), [("P-256", 64), ("P-384", 96), ("P-521", 132)])
async def test_ecdsa_and_ecdh_generated_on_each_curve(curve: str, size: int) -> None:
    result = await js(
        f"""
        const pair = await subtle.generateKey({{name: "ECDSA", namedCurve: "{curve}"}}, false, ["sign", "verify"]);
        const sig = await subtle.sign({{name: "ECDSA", hash: "SHA-384"}}, pair.privateKey, utf8("m"));
        const a = await subtle.generateKey({{name: "ECDH", namedCurve: "{curve}"}}, true, ["deriveBits"]);
        const b = await subtle.generateKey({{name: "ECDH", namedCurve: "{curve}"}}, true, ["deriveBits"]);
        const ab = await subtle.deriveBits({{name: "ECDH", public: b.publicKey}}, a.privateKey, null);
        const ba = await subtle.deriveBits({{name: "ECDH", public: a.publicKey}}, b.privateKey, null);
        return {{sig: sig.byteLength, ok: await subtle.verify({{name: "ECDSA", hash: "SHA-384"}}, pair.publicKey, sig, utf8("m")),
                usages: [pair.privateKey.usages, pair.publicKey.usages, a.publicKey.usages],
                extractable: [pair.privateKey.extractable, pair.publicKey.extractable],
                agree: hex(ab) === hex(ba), bits: ab.byteLength * 8,
                notExtractable: await fail(subtle.exportKey("pkcs8", pair.privateKey))}};
        """
    )
    assert result["sig"] == size
    assert result["ok"] is True
    assert result["usages"] == [["sign"], ["verify"], []]
    assert result["extractable"] == [False, True]
    assert result["agree"] is True
    assert result["bits"] == {"P-256": 256, "P-384": 384, "P-521": 528}[curve]
    assert result["notExtractable"] == ["InvalidAccessError", True]


async def test_ecdh_p256_rfc5903() -> None:
    result = await js(
        """
        const priv = await subtle.importKey("jwk", {kty: "EC", crv: "P-256",
            d: "yI8B9RDZrD9wopLaojFt5UTpqriv6EBJxiqcV4YtFDM",
            x: "2tC2U5QiHPmwUeH-yleH0Jjf5jf8kLnvlF0MN3JYEYA", y: "UnGgRhzbglLWHxxFb6PlmrH0WzOsz19YOJ4Fd7iZC7M"},
          {name: "ECDH", namedCurve: "P-256"}, false, ["deriveBits", "deriveKey"]);
        const peer = await subtle.importKey("raw", unhex("04d12dfb5289c8d4f81208b70270398c342296970a0bccb74c736fc7554494bf6356fbf3ca366cc23e8157854c13c58d6aac23f046ada30f8353e74f33039872ab"),
          {name: "ECDH", namedCurve: "P-256"}, true, []);
        const other = await subtle.generateKey({name: "ECDH", namedCurve: "P-384"}, true, ["deriveBits"]);
        return {z: hex(await subtle.deriveBits({name: "ECDH", public: peer}, priv, 256)),
                short: hex(await subtle.deriveBits({name: "ECDH", public: peer}, priv, 12)),
                tooLong: await fail(subtle.deriveBits({name: "ECDH", public: peer}, priv, 264)),
                otherCurve: await fail(subtle.deriveBits({name: "ECDH", public: other.publicKey}, priv, 256)),
                peerUsage: await fail(subtle.importKey("raw", await subtle.exportKey("raw", peer), {name: "ECDH", namedCurve: "P-256"}, true, ["deriveBits"]))};
        """
    )
    assert result["z"] == "d6840f6b42f6edafd13116e0e12565202fef8e9ece7dce03812464d04b9442de"
    assert result["short"] == "d680"  # 12 bits: the rest of the last byte masked off
    assert result["tooLong"] == ["OperationError", True]
    assert result["otherCurve"] == ["InvalidAccessError", True]
    assert result["peerUsage"] == ["SyntaxError", True]


async def test_x25519_rfc7748() -> None:
    prefix = "302e020100300506032b656e04220420"
    result = await js(
        f"""
        const alice = await subtle.importKey("pkcs8", unhex("{prefix}77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"), "X25519", true, ["deriveBits"]);
        const bob = await subtle.importKey("raw", unhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"), {{name: "X25519"}}, true, []);
        const jwk = await subtle.exportKey("jwk", alice);
        return {{shared: hex(await subtle.deriveBits({{name: "X25519", public: bob}}, alice, 256)),
                jwk: [jwk.kty, jwk.crv, jwk.x], bobRaw: hex(await subtle.exportKey("raw", bob))}};
        """
    )
    assert result["shared"] == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
    # Alice's public key, 8520f009..., in base64url.
    assert result["jwk"] == ["OKP", "X25519", "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"]
    assert result["bobRaw"] == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"


async def test_ed25519_rfc8032_test_1() -> None:
    prefix = "302e020100300506032b657004220420"
    result = await js(
        f"""
        const priv = await subtle.importKey("pkcs8", unhex("{prefix}9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"), "Ed25519", true, ["sign"]);
        const pub = await subtle.importKey("raw", unhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"), "Ed25519", true, ["verify"]);
        const sig = await subtle.sign("Ed25519", priv, new Uint8Array(0));
        const gen = await subtle.generateKey("Ed25519", true, ["sign", "verify"]);
        const genSig = await subtle.sign({{name: "Ed25519"}}, gen.privateKey, utf8("hello"));
        const jwk = await subtle.exportKey("jwk", priv);
        return {{sig: hex(sig), ok: await subtle.verify("Ed25519", pub, sig, new Uint8Array(0)),
                gen: await subtle.verify("Ed25519", gen.publicKey, genSig, utf8("hello")),
                jwk: [jwk.kty, jwk.crv, jwk.x, jwk.d],
                spki: hex(await subtle.exportKey("spki", pub)).slice(0, 24)}};
        """
    )
    assert result["sig"] == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    assert result["ok"] is True
    assert result["gen"] is True
    assert result["jwk"] == [
        "OKP",
        "Ed25519",
        "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
        "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
    ]
    assert result["spki"] == "302a300506032b6570032100"


async def test_rsa_outputs_of_openssl() -> None:
    result = await js(
        f"""
        const pkcs8 = b64("{RSA["pkcs8"]}"), spki = b64("{RSA["spki"]}");
        const message = utf8({json.dumps(RSA["message"])});
        const key = (name, format, data, usages) => subtle.importKey(format, data, {{name, hash: "SHA-256"}}, true, usages);
        const signer = await key("RSASSA-PKCS1-v1_5", "pkcs8", pkcs8, ["sign"]);
        const checker = await key("RSASSA-PKCS1-v1_5", "spki", spki, ["verify"]);
        const pssChecker = await key("RSA-PSS", "spki", spki, ["verify"]);
        const decrypter = await key("RSA-OAEP", "pkcs8", pkcs8, ["decrypt"]);
        const pssSigner = await key("RSA-PSS", "pkcs8", pkcs8, ["sign"]);
        const mine = await subtle.sign({{name: "RSA-PSS", saltLength: 32}}, pssSigner, message);
        return {{pkcs1: hex(await subtle.sign("RSASSA-PKCS1-v1_5", signer, message)),
                pkcs1Ok: await subtle.verify("RSASSA-PKCS1-v1_5", checker, unhex("{RSA["pkcs1_sha256"]}"), message),
                pss: await subtle.verify({{name: "RSA-PSS", saltLength: 32}}, pssChecker, unhex("{RSA["pss_sha256_salt32"]}"), message),
                pssWrongSalt: await subtle.verify({{name: "RSA-PSS", saltLength: 20}}, pssChecker, unhex("{RSA["pss_sha256_salt32"]}"), message),
                mine: await subtle.verify({{name: "RSA-PSS", saltLength: 32}}, pssChecker, mine, message),
                oaep: new TextDecoder().decode(await subtle.decrypt("RSA-OAEP", decrypter, unhex("{RSA["oaep_sha256"]}"))),
                alg: checker.algorithm, exponentIsBytes: checker.algorithm.publicExponent instanceof Uint8Array,
                jwk: (({{kty, alg, e}}) => [kty, alg, e])(await subtle.exportKey("jwk", checker)),
                spkiSame: hex(await subtle.exportKey("spki", checker)) === hex(spki),
                notRsa: await fail(subtle.importKey("spki", spki, {{name: "ECDSA", namedCurve: "P-256"}}, true, ["verify"])),
                raw: await fail(subtle.exportKey("raw", checker))}};
        """
    )
    assert result["pkcs1"] == RSA["pkcs1_sha256"]  # PKCS #1 v1.5 is deterministic
    assert result["pkcs1Ok"] is True
    assert result["pss"] is True
    assert result["pssWrongSalt"] is False
    assert result["mine"] is True
    assert result["oaep"] == RSA["message"]
    assert result["alg"] == {
        "name": "RSASSA-PKCS1-v1_5",
        "modulusLength": 2048,
        "publicExponent": {"0": 1, "1": 0, "2": 1},
        "hash": {"name": "SHA-256"},
    }
    assert result["exponentIsBytes"] is True
    assert result["jwk"] == ["RSA", "RS256", "AQAB"]
    assert result["spkiSame"] is True
    assert result["notRsa"] == ["DataError", True]
    assert result["raw"] == ["InvalidAccessError", True]


async def test_rsa_generation_jwk_round_trip_and_oaep_wrap() -> None:
    result = await js(
        """
        const e = new Uint8Array([1, 0, 1]);
        const pair = await subtle.generateKey({name: "RSA-OAEP", modulusLength: 2048, publicExponent: e, hash: "SHA-1"}, true,
                                              ["encrypt", "decrypt", "wrapKey", "unwrapKey"]);
        const jwk = await subtle.exportKey("jwk", pair.privateKey);
        const again = await subtle.importKey("jwk", jwk, {name: "RSA-OAEP", hash: "SHA-1"}, true, ["decrypt", "unwrapKey"]);
        const label = utf8("label");
        const sealed = await subtle.encrypt({name: "RSA-OAEP", label}, pair.publicKey, utf8("secret"));
        const aes = await subtle.generateKey({name: "AES-GCM", length: 256}, true, ["encrypt", "decrypt"]);
        const wrapped = await subtle.wrapKey("jwk", aes, pair.publicKey, {name: "RSA-OAEP"});
        const unwrapped = await subtle.unwrapKey("jwk", wrapped, again, "RSA-OAEP", "AES-GCM", false, ["decrypt"]);
        return {usages: [pair.publicKey.usages, pair.privateKey.usages], alg: jwk.alg, members: Object.keys(jwk).sort(),
                opened: new TextDecoder().decode(await subtle.decrypt({name: "RSA-OAEP", label}, again, sealed)),
                wrongLabel: await fail(subtle.decrypt({name: "RSA-OAEP"}, again, sealed)),
                same: hex(await subtle.exportKey("raw", aes)).length, unwrapped: [unwrapped.algorithm, unwrapped.usages, unwrapped.extractable],
                badExponent: await fail(subtle.generateKey({name: "RSA-PSS", modulusLength: 2048, publicExponent: new Uint8Array([5]), hash: "SHA-256"}, true, ["sign"]))};
        """
    )
    assert result["usages"] == [["encrypt", "wrapKey"], ["decrypt", "unwrapKey"]]
    assert result["alg"] == "RSA-OAEP"
    assert result["members"] == sorted(
        ["alg", "d", "dp", "dq", "e", "ext", "key_ops", "kty", "n", "p", "q", "qi"]
    )
    assert result["opened"] == "secret"
    assert result["wrongLabel"] == ["OperationError", True]
    assert result["unwrapped"] == [{"name": "AES-GCM", "length": 256}, ["decrypt"], False]
    assert result["badExponent"] == ["OperationError", True]


async def test_errors_for_unknown_algorithms_and_arguments() -> None:
    result = await js(
        """
        const key = await subtle.generateKey({name: "aes-gcm", length: 128}, true, ["encrypt"]);
        return {name: key.algorithm.name,
                unknown: await fail(subtle.generateKey({name: "AES-XTS", length: 128}, true, ["encrypt"])),
                digestOnly: await fail(subtle.generateKey("SHA-256", true, ["sign"])),
                md5: hex(await subtle.digest("MD5", utf8("abc"))),
                tooFew: await subtle.encrypt({name: "AES-GCM"}).catch((e) => e.name),
                notKey: await subtle.exportKey("raw", {}).catch((e) => e.name),
                format: await subtle.exportKey("pem", key).catch((e) => e.name),
                badUsage: await subtle.generateKey({name: "AES-GCM", length: 128}, true, ["fly"]).catch((e) => e.name),
                constructed: (() => { try { new CryptoKey(); } catch (e) { return e.name; } })(),
                tag: Object.prototype.toString.call(key)};
        """
    )
    assert result == {
        "name": "AES-GCM",
        "unknown": ["NotSupportedError", True],
        "digestOnly": ["NotSupportedError", True],
        "md5": "900150983cd24fb0d6963f7d28e17f72",
        "tooFew": "TypeError",
        "notKey": "TypeError",
        "format": "TypeError",
        "badUsage": "TypeError",
        "constructed": "TypeError",
        "tag": "[object CryptoKey]",
    }
