"""The self-signed certificate `celld run --local-protocol https` serves with.

As `wrangler dev` does, celld makes its own certificate for local HTTPS: a self-signed
one for ``localhost``, ``127.0.0.1``, ``::1`` and the address it listens on, valid for 30
days, kept in the state folder (``<persist-to>/local-cert/``) and made again when it
nears its end or the address changes. Clients must be told to trust it (``curl -k`` or
``--cacert <persist-to>/local-cert/cert.pem``). Pass ``--https-key-path`` and
``--https-cert-path`` to serve a certificate of your own instead.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

VALID_DAYS = 30
RENEW_BEFORE = datetime.timedelta(days=2)
FOLDER = "local-cert"


def local_certificate(state: Path, ip: str) -> tuple[Path, Path]:
    """(cert, key) paths of a certificate for `ip` under `state`, made if needed."""
    folder = state / FOLDER
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    names = _names(ip)
    if cert_path.is_file() and key_path.is_file() and _still_good(cert_path, names):
        return cert_path, key_path
    folder.mkdir(parents=True, exist_ok=True)
    cert_pem, key_pem = _make(names)
    _write_private(key_path, key_pem)
    cert_path.write_bytes(cert_pem)
    return cert_path, key_path


def _names(ip: str) -> list[str]:
    names = ["localhost", "127.0.0.1", "::1"]
    if ip not in names and ip not in ("0.0.0.0", "::", "*"):
        names.append(ip)
    return names


def _still_good(cert_path: Path, names: list[str]) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    covered = {str(v) for v in alt.get_values_for_type(x509.DNSName)}
    covered |= {str(v) for v in alt.get_values_for_type(x509.IPAddress)}
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    return left > RENEW_BEFORE and all(n in covered for n in names)


def _make(names: list[str]) -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _write_private(path: Path, data: bytes) -> None:
    """Write a private key readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
