"""Amazon MSK's IAM access control for every Kafka client: a SASL OAUTHBEARER token provider.

Set ``BROKER_SECURITY_PROTOCOL=SASL_SSL``, ``BROKER_SASL_MECHANISM=OAUTHBEARER`` and
``BROKER_SASL_OAUTH_TOKEN_PROVIDER=app.msk_iam:MskIamTokenProvider``. The region comes
from ``AWS_REGION`` (or ``AWS_DEFAULT_REGION``), the credentials from AWS's default
chain (the task's or pod's role, the environment, a profile). The signer is AWS's
``aws-msk-iam-sasl-signer-python``: ``pip install 'effectively-once[msk]'``.

A token is a signed URL valid for 15 minutes; one is reused by every connection of the
process until a minute before it expires (faust's consumer runs in a thread of its own,
hence a thread lock).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from aiokafka.abc import AbstractTokenProvider

RENEW_BEFORE_EXPIRY_SECONDS = 60.0


def _signer() -> Callable[[str], tuple[str, int]]:
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError:
        raise ValueError(
            "MSK IAM needs aws-msk-iam-sasl-signer-python: pip install 'effectively-once[msk]'"
        ) from None
    generate: Callable[[str], tuple[str, int]] = MSKAuthTokenProvider.generate_auth_token
    return generate


class MskIamTokenProvider(AbstractTokenProvider):
    """Tokens for MSK's IAM authentication, from the default AWS credentials."""

    def __init__(self, region: str | None = None, signer: Any = None) -> None:
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise ValueError("set AWS_REGION to the MSK cluster's region")
        self.region = region
        self._sign = signer or _signer()
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at = 0.0  # epoch seconds

    async def token(self) -> str:
        """A token valid for at least another minute (signing runs off the event loop)."""
        return await asyncio.to_thread(self._current)

    def _current(self) -> str:
        with self._lock:
            if self._token is None or time.time() > self._expires_at - RENEW_BEFORE_EXPIRY_SECONDS:
                token, expiry_ms = self._sign(self.region)
                self._token, self._expires_at = token, expiry_ms / 1000
            return self._token
