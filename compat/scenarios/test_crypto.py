"""Web Crypto, node:crypto and jose (compat/projects/crypto, installed with `npm ci`): the
answers wrangler dev gave (compat/projects/crypto/expected.json) for everything
deterministic, round trips for the rest, and tokens each target made verified on both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compat.targets import CRYPTO, Target

EXPECTED: dict[str, Any] = json.loads((CRYPTO / "expected.json").read_text())
PAYLOAD = {"sub": "ada", "iat": 1700000000, "aud": "celld"}


def get(target: Target, path: str) -> Any:
    response = target.request("GET", path)
    assert response.status_code == 200, response.text
    return response.json()


def check(target: Target, kind: str, token: str) -> Any:
    response = target.request("POST", "/jose/check", json={"kind": kind, "token": token})
    assert response.status_code == 200, response.text
    return response.json()


def test_web_crypto_known_answers(crypto_target: Target) -> None:
    """Digests, HMAC, AES-GCM/CBC/CTR/KW, PBKDF2, HKDF, ECDH, Ed25519, RSA and JWK exports."""
    assert get(crypto_target, "/vectors") == EXPECTED["vectors"]


def test_web_crypto_error_names(crypto_target: Target) -> None:
    """The DOMException (or TypeError) each misuse rejects with."""
    assert get(crypto_target, "/errors")["names"] == EXPECTED["errors"]


def test_jose_deterministic_tokens(crypto_target: Target) -> None:
    """HS256, RS256 and EdDSA JWTs of fixed keys are the same bytes on both targets."""
    tokens = get(crypto_target, "/jose/tokens")
    assert {k: tokens[k] for k in EXPECTED["deterministicTokens"]} == EXPECTED[
        "deterministicTokens"
    ]


def test_jose_round_trips_its_own_tokens(crypto_target: Target) -> None:
    """ES256 and PS256 JWTs, JWEs (RSA-OAEP + A256GCM, A256KW + A128CBC-HS256,
    ECDH-ES+A128KW) made by the target verify and decrypt there."""
    tokens = get(crypto_target, "/jose/tokens")
    for kind, token in tokens.items():
        answer = check(crypto_target, kind, token)
        assert answer["ok"] is True, (kind, answer)
        if kind.startswith("JWE") and kind != "JWE":
            assert answer["payload"] == {"JWEdir": "direct", "JWEecdh": "agreed"}[kind]
        else:
            assert answer["payload"] == PAYLOAD


@pytest.mark.parametrize("maker", ["wrangler", "celld"])
def test_jose_accepts_tokens_made_by_each_target(crypto_target: Target, maker: str) -> None:
    """Every token recorded from `maker` (signatures and JWEs with random parts) verifies or
    decrypts here; a token with one changed signature byte does not."""
    for kind, token in EXPECTED["tokens"][maker].items():
        answer = check(crypto_target, kind, token)
        assert answer["ok"] is True, (maker, kind, answer)
    head, body, signature = EXPECTED["tokens"][maker]["ES256"].split(".")
    forged = ".".join([head, body, ("A" if signature[0] != "A" else "B") + signature[1:]])
    answer = check(crypto_target, "ES256", forged)
    assert answer == {
        "ok": False,
        "code": "ERR_JWS_SIGNATURE_VERIFICATION_FAILED",
        "name": "JWSSignatureVerificationFailed",
    }


def test_jose_generated_keys(crypto_target: Target) -> None:
    """jose.generateKeyPair for RS256, PS256, ES256/384/512 and EdDSA, exportJWK/SPKI, and an
    RSA-OAEP-256 JWE with a generated key."""
    assert get(crypto_target, "/jose/generated") == EXPECTED["generated"]


def test_node_crypto_synchronous_functions(crypto_target: Target) -> None:
    """createHash (sha256, md5, sha512-256, copy), createHmac, pbkdf2Sync, hkdfSync,
    scryptSync, createSecretKey, timingSafeEqual, randomBytes, randomUUID."""
    assert get(crypto_target, "/node") == EXPECTED["node"]


@pytest.mark.parametrize("call", ["pbkdf2", "scrypt", "hkdf", "sign", "verify", "generateKeyPair"])
def test_node_crypto_callbacks(crypto_target: Target, call: str) -> None:
    """node:crypto's callback functions (RSA-SHA256 signatures are deterministic)."""
    assert get(crypto_target, f"/node/async?call={call}") == EXPECTED["nodeCallbacks"][call]


def test_random_values(crypto_target: Target) -> None:
    """getRandomValues fills 64 KiB twice with different bytes; randomUUID has 36 chars."""
    assert get(crypto_target, "/random") == {"differ": True, "uuid": 36}
