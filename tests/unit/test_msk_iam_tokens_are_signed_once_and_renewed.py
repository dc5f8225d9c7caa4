"""The MSK IAM token provider signs a token once and renews it a minute before it expires.

Contract: ``app.msk_iam:MskIamTokenProvider``, named by
``BROKER_SASL_OAUTH_TOKEN_PROVIDER``, takes its region from ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``); without one, or without the ``msk`` extra, the settings refuse
it at start in one line saying what to do. Every connection of the process gets the
same token until a minute before it expires, then a new one. With the extra installed,
the token is AWS's signed ``kafka-cluster:Connect`` URL for the region (signed locally
from the credentials; nothing is sent to AWS).
"""

from __future__ import annotations

import base64
import sys
import time
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from app.msk_iam import MskIamTokenProvider
from app.settings import Settings, describe, get_settings

PROVIDER = "app.msk_iam:MskIamTokenProvider"
MSK = {
    "broker_security_protocol": "SASL_SSL",
    "broker_sasl_mechanism": "OAUTHBEARER",
    "broker_sasl_oauth_token_provider": PROVIDER,
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [*Settings.model_fields, "aws_region", "aws_default_region"]:
        monkeypatch.delenv(name.upper(), raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


class Signer:
    """Stands in for AWS's signer: counts its calls; tokens valid for ``lasts`` seconds."""

    def __init__(self, lasts: float) -> None:
        self.lasts = lasts
        self.calls = 0

    def __call__(self, region: str) -> tuple[str, int]:
        self.calls += 1
        return f"token-{self.calls}-{region}", int((time.time() + self.lasts) * 1000)


async def test_a_token_is_reused_until_a_minute_before_it_expires() -> None:
    lasting = Signer(lasts=900)
    provider = MskIamTokenProvider("eu-west-1", signer=lasting)
    assert [await provider.token() for _ in range(3)] == ["token-1-eu-west-1"] * 3

    expiring = Signer(lasts=30)  # inside the last minute: renewed at every call
    provider = MskIamTokenProvider("eu-west-1", signer=expiring)
    assert [await provider.token() for _ in range(2)] == [
        "token-1-eu-west-1",
        "token-2-eu-west-1",
    ]


def test_the_settings_refuse_it_without_a_region_or_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(**MSK)  # type: ignore[arg-type]
    assert describe(raised.value) == [
        f"BROKER_SASL_OAUTH_TOKEN_PROVIDER: {PROVIDER}() failed: ValueError: set AWS_REGION "
        "to the MSK cluster's region"
    ]
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)  # not installed
    with pytest.raises(ValidationError) as raised:
        Settings(**MSK)  # type: ignore[arg-type]
    assert describe(raised.value) == [
        f"BROKER_SASL_OAUTH_TOKEN_PROVIDER: {PROVIDER}() failed: ValueError: MSK IAM needs "
        "aws-msk-iam-sasl-signer-python: pip install 'effectively-once[msk]'"
    ]


async def test_with_the_extra_the_token_is_awss_signed_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("aws_msk_iam_sasl_signer", reason="the msk extra is not installed")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    settings = Settings(**MSK)  # type: ignore[arg-type]
    provider = settings.broker_security.client_options()["sasl_oauth_token_provider"]

    token = await provider.token()

    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    assert url.startswith("https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect")
    assert "X-Amz-Signature=" in url
