"""An ACL refusal over a client certificate names the principal the broker sees.

Contract: ``certificate_subject`` reads a PEM certificate's subject as Java's X500Principal
writes it (RFC 2253: the last attribute first), which Kafka's default principal for a client
certificate is, so the line says ``User:CN=orders,OU=payments,O=Shop`` to grant (before,
"the client certificate's principal"); a subject it cannot write plainly (an attribute
Java writes as an OID, a value that needs escaping) or a file it cannot read gives None,
and the line keeps the general words.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from app.runtime.topic_check import certificate_subject


def certificate(folder: Path, *attributes: tuple[x509.ObjectIdentifier, str]) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    path = folder / "client.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


def test_the_subject_is_written_as_kafkas_default_principal(tmp_path: Path) -> None:
    path = certificate(
        tmp_path,
        (NameOID.COUNTRY_NAME, "DE"),
        (NameOID.ORGANIZATION_NAME, "Shop"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "payments"),
        (NameOID.COMMON_NAME, "orders"),
    )
    assert certificate_subject(path) == "CN=orders,OU=payments,O=Shop,C=DE"


@pytest.mark.parametrize(
    "attributes",
    [
        ((NameOID.COMMON_NAME, "orders, eu"),),
        ((NameOID.EMAIL_ADDRESS, "ops@example.com"), (NameOID.COMMON_NAME, "orders")),
    ],
)
def test_a_subject_it_cannot_write_plainly_is_none(
    tmp_path: Path, attributes: tuple[tuple[x509.ObjectIdentifier, str], ...]
) -> None:
    assert certificate_subject(certificate(tmp_path, *attributes)) is None


def test_a_file_it_cannot_read_is_none(tmp_path: Path) -> None:
    (tmp_path / "not.crt").write_text("not a certificate")
    assert certificate_subject(str(tmp_path / "not.crt")) is None
    assert certificate_subject(str(tmp_path / "missing.crt")) is None
