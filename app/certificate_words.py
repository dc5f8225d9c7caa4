"""A server certificate a client refused, in words: the part every client says alike.

The broker's, the database's and Redis's clients each name the setting that holds the
CA; what their certificate verification codes mean is shared here. An expired (or not
yet valid) certificate is none of the CA file's doing: saying "the CA must hold it"
sent operators to the wrong file.
"""

from __future__ import annotations

# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH.
NAME_MISMATCH = frozenset({62, 64})
# OpenSSL's X509_V_ERR_CERT_NOT_YET_VALID and X509_V_ERR_CERT_HAS_EXPIRED.
OUT_OF_DATE = frozenset({9, 10})


def certificate_refused(code: int | None, reason: str, *, misnamed: str, untrusted: str) -> str:
    """What a certificate the client refused with OpenSSL's verify ``code`` and ``reason``
    means: ``misnamed`` (the client's words, for a name the certificate does not hold),
    out of date, or else ``untrusted`` (the client's words, naming its CA setting)."""
    if code in NAME_MISMATCH:
        return misnamed
    if code in OUT_OF_DATE:
        return (
            f"its certificate is out of date ({reason}): the server's certificate must be "
            "renewed, or this host's clock set right (the CA is not the cause)"
        )
    return untrusted
