"""Throw-away certificates for a local TLS broker: a CA, the certificates it signs, PEM files.

For tests and development only (``cryptography`` comes with the ``dev`` extra). Keys
are EC P-256, quick to make; certificates are valid for a day. A server certificate
names its hosts as subject alternative names (IP addresses as such), which is what a
client checks the broker's name against.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

VALID_FOR = timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key as PEM files; ``chain`` holds both (Kafka's PEM keystore)."""

    cert: Path
    key: Path
    chain: Path


class CertificateAuthority:
    """A self-signed CA that writes what it issues under ``folder``."""

    def __init__(self, folder: Path, name: str = "effectively-once test CA") -> None:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._key = _new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._subject = subject
        self._cert = (
            _builder(subject, subject, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .sign(self._key, _sha256())
        )
        self.cert = folder / "ca.pem"
        self.cert.write_bytes(_cert_pem(self._cert))

    def issue(
        self,
        name: str,
        hosts: tuple[str, ...] = (),
        *,
        client: bool = False,
        key_password: str | None = None,
        expired: bool = False,
    ) -> Issued:
        """A certificate for ``name``: a server's for ``hosts``, or a client's (``client``);
        its key encrypted with ``key_password`` when given; valid until a day ago when
        ``expired``."""
        from cryptography import x509
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = _new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            _builder(subject, self._subject, key.public_key(), expired=expired)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(host) for host in hosts]),
                critical=False,
            )
        cert = builder.sign(self._key, _sha256())
        paths = Issued(
            cert=self.folder / f"{name}.crt",
            key=self.folder / f"{name}.key",
            chain=self.folder / f"{name}.pem",
        )
        paths.cert.write_bytes(_cert_pem(cert))
        paths.key.write_bytes(_key_pem(key, key_password))
        paths.chain.write_bytes(_key_pem(key, None) + _cert_pem(cert))
        return paths


def _new_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _sha256() -> Any:
    from cryptography.hazmat.primitives import hashes

    return hashes.SHA256()


def _builder(subject: Any, issuer: Any, public_key: Any, expired: bool = False) -> Any:
    from cryptography import x509

    now = datetime.now(UTC) - (VALID_FOR + timedelta(days=1) if expired else timedelta(0))
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
    )


def _key_usage(ca: bool) -> Any:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=not ca,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _general_name(host: str) -> Any:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _cert_pem(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(cert.public_bytes(serialization.Encoding.PEM))


def _key_pem(key: Any, password: str | None) -> bytes:
    from cryptography.hazmat.primitives import serialization

    encryption: Any = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    # PKCS#8: the form Kafka's PEM keystore reads.
    return bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
