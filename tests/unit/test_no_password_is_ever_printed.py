"""No password is ever printed, whatever is wrong with the URL that carries it.

Contract: a ``DATABASE_URL`` or ``REDIS_URL`` holding the password ``s3cret``
that has no scheme, an unsupported scheme, a port that is no number or a
shape no parser reads is refused at start-up by the settings with a message
that names the variable and what is wrong, but not the value; the worker's
start, ``python -m dlq``, ``python -m app trace`` and ``python -m app.db.migrate``
then print one such line (no traceback) and exit with code 2. A well-formed URL
to a database that does not answer is shown with its password masked, and so is any URL
in the text of a failure that ``/ready`` shows or the relay records against a row. The same holds
for ``BROKER_SASL_PASSWORD`` and ``BROKER_SSL_KEY_PASSWORD`` in broker security settings
that are wrong (the worker, ``python -m dlq``, ``python -m app trace`` and
``python -m app relay``), and for a ``BROKER_URL`` that holds a login (``kafka://user:
password@host``): the broker's login has settings of its own, and an address is shown
in log lines, so it is refused at start by the worker, the relay and ``python -m dlq``.
(Databases are pointed at a port nothing listens on, so nothing is reached.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from app.__main__ import build_cli
from app.db import migrate
from app.monitoring import readiness
from app.outbox import relay
from app.runtime.entry import build_app_or_exit
from app.settings import Settings, get_settings
from dlq.cli import cli as dlq_cli

PASSWORD = "s3cret"

BAD_DATABASE_URLS = [
    f"app:{PASSWORD}@db.internal/orders",  # no scheme: the defect
    f"app:{PASSWORD}@db.internal:5432",
    f"oracle://app:{PASSWORD}@db.internal/orders",
    f"postgresql://app:{PASSWORD}@db.internal:notaport/orders",
    f"mysql://app:{PASSWORD}@db.internal:99999999/orders",
    f"postgresql://app:{PASSWORD}@db internal/orders",
]
BAD_REDIS_URLS = [
    f":{PASSWORD}@cache.internal:6379/0",
    f"memcached://:{PASSWORD}@cache.internal/0",
    f"redis://:{PASSWORD}@cache.internal:notaport/0",
]
BAD_BROKER_URLS = [
    f"kafka://app:{PASSWORD}@broker.internal:9092",
    f"kafka://h1:9092;kafka://app:{PASSWORD}@h2",
    f"app:{PASSWORD}@broker.internal",
]
UNREACHABLE = f"postgresql://app:{PASSWORD}@127.0.0.1:1/orders"
# Broker security settings that are wrong, each holding the password; the variable named.
BAD_BROKER_SECURITY = {
    "BROKER_SASL_PASSWORD": {"BROKER_SASL_PASSWORD": PASSWORD},
    "BROKER_SASL_MECHANISM": {
        "BROKER_SASL_MECHANISM": "SCRAM-SHA-512",
        "BROKER_SASL_USERNAME": "alice",
        "BROKER_SASL_PASSWORD": PASSWORD,
    },
    "BROKER_SSL_CA_FILE": {
        "BROKER_SECURITY_PROTOCOL": "SASL_SSL",
        "BROKER_SASL_MECHANISM": "PLAIN",
        "BROKER_SASL_USERNAME": "alice",
        "BROKER_SASL_PASSWORD": PASSWORD,
        "BROKER_SSL_CA_FILE": "/no/such/ca.pem",
    },
    "BROKER_SSL_KEY_PASSWORD": {
        "BROKER_SECURITY_PROTOCOL": "SSL",
        "BROKER_SSL_KEY_PASSWORD": PASSWORD,
    },
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only what a test sets: no DATABASE_URL or REDIS_URL from the machine."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("BROKER_URL", "kafka://127.0.0.1:1")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _one_clean_line(output: str) -> None:
    assert PASSWORD not in output
    assert "Traceback" not in output


@pytest.mark.parametrize("url", BAD_DATABASE_URLS)
def test_the_settings_name_a_bad_database_url_without_quoting_it(url: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(database_url=url)

    errors = raised.value.errors()
    assert PASSWORD not in " ".join(error["msg"] for error in errors)
    assert [error["loc"] for error in errors] == [("database_url",)]


@pytest.mark.parametrize("url", BAD_REDIS_URLS)
def test_the_settings_name_a_bad_redis_url_without_quoting_it(url: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(redis_url=url)

    errors = raised.value.errors()
    assert PASSWORD not in " ".join(error["msg"] for error in errors)
    assert [error["loc"] for error in errors] == [("redis_url",)]


@pytest.mark.parametrize("url", BAD_DATABASE_URLS)
def test_the_worker_refuses_to_start_in_one_line(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", url)

    with pytest.raises(SystemExit) as exited:
        build_app_or_exit()

    out, err = capsys.readouterr()
    assert exited.value.code == 2
    _one_clean_line(out + err)
    assert "DATABASE_URL" in err


@pytest.mark.parametrize("url", [*BAD_DATABASE_URLS, UNREACHABLE])
def test_migrate_says_what_is_wrong_in_one_line(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", url)

    with pytest.raises(SystemExit) as exited:
        migrate.main([])

    out, err = capsys.readouterr()
    assert exited.value.code == 2
    _one_clean_line(out + err)
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("url", BAD_DATABASE_URLS)
def test_the_dlq_command_refuses_a_bad_url_in_one_line(url: str) -> None:
    result = CliRunner().invoke(dlq_cli, ["list"], env={"DATABASE_URL": url})

    assert result.exit_code == 2, result.output
    _one_clean_line(result.output)
    assert "DATABASE_URL" in result.output


@pytest.mark.parametrize("url", BAD_REDIS_URLS)
def test_the_dlq_command_refuses_a_bad_redis_url_in_one_line(url: str) -> None:
    result = CliRunner().invoke(dlq_cli, ["list"], env={"REDIS_URL": url})

    assert result.exit_code == 2, result.output
    _one_clean_line(result.output)


@pytest.mark.parametrize("url", [*BAD_DATABASE_URLS, UNREACHABLE])
@pytest.mark.parametrize("how", ["environment", "option"])
def test_trace_says_what_is_wrong_in_one_line(url: str, how: str) -> None:
    if how == "option":
        result = CliRunner().invoke(build_cli(), ["trace", "e-1", "--database-url", url])
    else:
        result = CliRunner().invoke(build_cli(), ["trace", "e-1"], env={"DATABASE_URL": url})

    assert result.exit_code == 2, result.output
    _one_clean_line(result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_an_unreachable_database_is_shown_with_its_password_masked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", UNREACHABLE)

    with pytest.raises(SystemExit):
        migrate.main([])

    assert "app:***@127.0.0.1:1" in capsys.readouterr().err


@pytest.mark.parametrize("variable", list(BAD_BROKER_SECURITY))
def test_wrong_broker_security_settings_never_print_their_password(
    variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = BAD_BROKER_SECURITY[variable]
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(SystemExit) as exited:
        build_app_or_exit()
    worker = capsys.readouterr()
    dlq = CliRunner().invoke(dlq_cli, ["list"], env=env)
    trace = CliRunner().invoke(build_cli(), ["trace", "e-1"], env=env)
    relay = CliRunner().invoke(build_cli(), ["relay"], env=env)

    assert exited.value.code == 2
    assert (dlq.exit_code, trace.exit_code, relay.exit_code) == (2, 2, 2)
    for said in (worker.out + worker.err, dlq.output, trace.output, relay.output):
        _one_clean_line(said)
        assert f"{variable}: " in said, said


@pytest.mark.parametrize("url", BAD_BROKER_URLS)
def test_the_settings_refuse_a_login_in_the_broker_url_without_quoting_it(url: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(broker_url=url)

    errors = raised.value.errors()
    assert [error["loc"] for error in errors] == [("broker_url",)]
    assert PASSWORD not in errors[0]["msg"]
    assert "BROKER_SASL_USERNAME and BROKER_SASL_PASSWORD" in errors[0]["msg"]


@pytest.mark.parametrize("url", BAD_BROKER_URLS)
@pytest.mark.parametrize("command", ["worker", "relay", "dlq"])
def test_each_command_refuses_a_login_in_the_broker_url_in_one_line(
    url: str, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BROKER_URL", url)
    if command == "worker":
        with pytest.raises(SystemExit) as exited:
            build_app_or_exit()
        code, output = exited.value.code, "".join(capsys.readouterr())
    else:
        cli, args = (build_cli(), ["relay"]) if command == "relay" else (dlq_cli, ["list"])
        result = CliRunner().invoke(cli, args)
        code, output = result.exit_code, result.output

    assert code == 2, output
    _one_clean_line(output)
    assert "BROKER_URL" in output


class _RefusingEngine:
    """An engine whose every connection fails with a message quoting a URL's password,
    as a driver or a proxy in front of the database may word it."""

    url = make_url("postgresql+asyncpg://app@db.internal:5432/orders")

    def connect(self) -> Any:
        raise OSError(f"cannot reach postgresql://app:{PASSWORD}@db.internal:5432/orders")


@pytest.mark.parametrize("check", ["database", "outbox"])
async def test_ready_never_quotes_a_password_its_failure_carries(check: str) -> None:
    engine: Any = _RefusingEngine()
    if check == "database":
        result = await readiness.database(engine, within=1.0)
    else:
        result = await readiness.outbox(engine, limit=60.0, within=1.0)

    assert not result.ok
    assert "app:***@db.internal" in result.detail
    assert PASSWORD not in result.detail


def test_a_relays_failure_text_never_quotes_a_password() -> None:
    said = relay._describe(OSError(f"refused: kafka://app:{PASSWORD}@broker.internal:9092"))

    assert said == "OSError: refused: kafka://app:***@broker.internal:9092"
