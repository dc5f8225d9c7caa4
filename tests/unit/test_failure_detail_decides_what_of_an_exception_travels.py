"""``FAILURE_DETAIL`` decides what of a failure's exception reaches the DLT record, the
``failed_event`` row and the log.

Contract: ``type`` lets only the exception's class through: ``dlt-exception-type`` and the
row's ``exception_type``; no message or stack trace header, an empty message in the row,
a log line naming the class and no traceback. ``message`` (the default) adds the
exception's message, and ``full`` its stack trace too: the ``dlt-exception-stacktrace``
header and the log record's traceback (``exc`` in JSON logs; after the line in text
logs). Whatever travels is scrubbed (``app.scrub``): no bound parameter, no value the
database quoted, no password of a URL and no secret of the settings (the broker's
passwords, the passwords in ``DATABASE_URL`` and ``REDIS_URL``). The setting is read in
any case; a wrong value is one line naming ``FAILURE_DETAIL``. Every engine the framework
makes hides bound parameters from its SQL errors. A log line says at most 2,000
characters of a message, and its traceback at most 8,000 of the trace, each with how many
more it had (a handler's exception quoting a 900 kB body wrote 900 kB per failure into the
log).
"""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError

from app.db.engine import create_engine
from app.failure_detail import FailureDetail, FailureDetailPolicy
from app.failure_log import log_failure
from app.logging_setup import TEXT_FORMAT, JsonFormatter
from app.pipeline.apply import HandlerFailed
from app.pipeline.decode import Decoded, decode
from app.pipeline.route import FailureRouter, Routed
from app.registry import HandlerSpec
from app.settings import Settings, describe
from dlq import headers as h
from dlq.policy import RetryPolicy
from tests.pipeline.events import TOPIC, Records

pytestmark = pytest.mark.usefixtures("settings_from_the_test_only")

EMAIL = "jane.doe@example.com"
CARD = "4111111111111111"
PASSWORD = "db-Pa55word"
SASL_PASSWORD = "sasl-Pa55word"
ERROR_TYPE = "sqlalchemy.exc.IntegrityError"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PERSONAL = (EMAIL, CARD, PASSWORD, SASL_PASSWORD)


class DriverError(Exception):
    """A driver's error whose message names the key's value, as PostgreSQL's DETAIL does."""


def sql_error() -> IntegrityError:
    """A unique-key violation with its parameters shown (an engine not made by the
    framework), raised from a driver error that quotes the key and a connection URL."""
    try:
        try:
            raise DriverError(
                f'duplicate key value violates unique constraint "pii_pkey" on '
                f"postgresql://orders:{PASSWORD}@db/orders\n"
                f"DETAIL:  Key (email)=({EMAIL}) already exists."
            )
        except DriverError as orig:
            raise IntegrityError(
                "INSERT INTO pii (email, card) VALUES ($1, $2)", (EMAIL, CARD), orig
            ) from orig
    except IntegrityError as exc:
        return exc


def routed(detail: FailureDetail) -> Routed:
    policy = FailureDetailPolicy(detail, secrets=(SASL_PASSWORD,))
    router = FailureRouter(RetryPolicy(TOPIC, ()), clock=lambda: NOW, detail=policy)

    async def fn(event: Any, ctx: Any) -> None:  # pragma: no cover - never called
        pass

    failed = HandlerFailed(HandlerSpec("OrderPaid", "points", fn), sql_error())
    return router.handler_failure(item(), "points", failed)


def item() -> Decoded:
    result = decode(Records().event("e-7", aggregate_id="o-9", version=3))
    assert isinstance(result, Decoded)
    return result


def headers(out: Routed) -> dict[str, str]:
    return {name: value.decode() for name, value in out.out.headers}


def assert_clean(text: str) -> None:
    found = [value for value in PERSONAL if value in text]
    assert not found, f"{found} in {text}"


@pytest.mark.parametrize("detail", list(FailureDetail))
def test_no_mode_lets_data_or_a_secret_through(detail: FailureDetail) -> None:
    out = routed(detail)

    assert_clean(repr(headers(out)))
    assert_clean(repr(out.row))
    assert_clean(out.error)
    assert headers(out)[h.DLT_EXCEPTION_TYPE] == out.row["exception_type"] == ERROR_TYPE


def test_type_lets_only_the_class_through() -> None:
    out = routed(FailureDetail.TYPE)

    assert not {h.DLT_EXCEPTION_MESSAGE, h.DLT_EXCEPTION_STACKTRACE} & headers(out).keys()
    assert out.row["exception_message"] == ""
    assert out.error.endswith(".fn: IntegrityError")


def test_message_adds_the_scrubbed_message_and_no_stack_trace() -> None:
    out = routed(FailureDetail.MESSAGE)

    message = headers(out)[h.DLT_EXCEPTION_MESSAGE]
    assert message == out.row["exception_message"]
    assert ".DriverError) duplicate key value violates" in message
    assert "[SQL: INSERT INTO pii (email, card) VALUES ($1, $2)]" in message
    assert "[SQL parameters hidden]" in message
    assert h.DLT_EXCEPTION_STACKTRACE not in headers(out)
    assert ".fn: IntegrityError: (" in out.error and "DriverError) duplicate" in out.error


def test_full_adds_the_scrubbed_stack_trace_with_its_causes() -> None:
    trace = headers(routed(FailureDetail.FULL))[h.DLT_EXCEPTION_STACKTRACE]

    assert trace.startswith("Traceback (most recent call last):")
    assert "DriverError: duplicate key value violates" in trace
    assert "Key (email)=(***) already exists." in trace
    assert f"{ERROR_TYPE}: (" in trace and "[SQL parameters hidden]" in trace


def test_the_default_is_message_and_any_case_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().failure_detail is FailureDetail.MESSAGE
    monkeypatch.setenv("FAILURE_DETAIL", " Full ")
    assert Settings().failure_detail is FailureDetail.FULL


def test_a_wrong_value_is_one_line_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILURE_DETAIL", "everything")
    with pytest.raises(ValidationError) as raised:
        Settings()

    (line,) = describe(raised.value)
    assert line.startswith("FAILURE_DETAIL: ") and "'full', 'message' or 'type'" in line


def test_the_policy_hides_the_settings_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", f"postgresql://orders:{PASSWORD}@db/orders")
    monkeypatch.setenv("REDIS_URL", "redis://:redis-Pa55word@cache:6379/0")
    monkeypatch.setenv("BROKER_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("BROKER_SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("BROKER_SASL_USERNAME", "orders")
    monkeypatch.setenv("BROKER_SASL_PASSWORD", SASL_PASSWORD)
    monkeypatch.setenv("FAILURE_DETAIL", "full")
    policy = FailureDetailPolicy.of(Settings())
    said = f"login {SASL_PASSWORD} refused; database password {PASSWORD}; redis-Pa55word"

    text = policy.describe(RuntimeError(said))

    assert text.message == "login *** refused; database password ***; ***"
    assert text.stacktrace is not None and "login *** refused" in text.stacktrace


@pytest.mark.parametrize("detail", list(FailureDetail))
def test_the_log_carries_what_the_records_carry(detail: FailureDetail) -> None:
    text = FailureDetailPolicy(detail).describe(sql_error())

    json_line = orjson.loads(logged(JsonFormatter(), text))
    plain = logged(logging.Formatter(TEXT_FORMAT), text)

    assert_clean(plain)
    assert_clean(repr(json_line))
    assert json_line["message"] == f"points: a handler failed ({text.line})"
    if detail is FailureDetail.FULL:
        assert str(json_line["exc"]).startswith("Traceback (most recent call last):")
        assert "Traceback (most recent call last):" in plain
    else:
        assert "exc" not in json_line and "Traceback" not in plain


def test_every_engine_hides_bound_parameters() -> None:
    for url in ("sqlite+aiosqlite:///:memory:", "postgresql+asyncpg://u:p@127.0.0.1:1/db"):
        assert create_engine(url).sync_engine.hide_parameters is True


def logged(formatter: logging.Formatter, text: Any) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger("effectively_once.test.failure_detail")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        log_failure(logger, logging.WARNING, text, "%s: a handler failed (%s)", "points", text.line)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue().rstrip("\n")


def test_a_log_line_says_a_long_message_cut_and_how_much_more_it_had() -> None:
    text = FailureDetailPolicy(FailureDetail.MESSAGE).describe(ValueError("w" * 900_000))

    assert text.message == "w" * 900_000  # the DLT header and the row cut it at their limits
    assert text.line == f"ValueError: {'w' * 2_000}... (898,000 more characters)"
    assert FailureDetailPolicy().describe(ValueError("short")).line == "ValueError: short"


def test_a_logged_traceback_is_cut_as_the_line_is() -> None:
    try:
        raise ValueError("w" * 900_000)
    except ValueError as exc:
        text = FailureDetailPolicy(FailureDetail.FULL).describe(exc)

    assert text.stacktrace is not None and len(text.stacktrace) > 900_000  # the DLT cuts it
    plain = logged(logging.Formatter(TEXT_FORMAT), text)
    json_line = orjson.loads(logged(JsonFormatter(), text))
    assert len(plain) < 8_000 + 2_000 + 200 and len(json_line["exc"]) < 8_000 + 30
    assert "[WARNING]" in plain and "Traceback (most recent call last):" in plain
    assert json_line["exc"].endswith(
        f"... ({len(text.stacktrace.rstrip()) - 8_000:,} more characters)"
    )
