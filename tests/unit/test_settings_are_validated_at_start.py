"""The settings object reads the documented environment variables and rejects bad values.

Contract: ``Settings()`` reads each field from the environment variable of
the same name (any case), falls back to the documented defaults, normalises
``DATABASE_URL`` to an async driver, treats a blank ``REDIS_URL`` as unset,
splits ``HANDLER_MODULES`` and ``CONSUMERS`` on commas (no consumer named:
all), reads ``RETRY_DELAYS`` as the retry tiers in seconds (default
``1,5,30,300``; empty: no tier, failures go straight to the DLT), takes
``DEFAULT_AGGREGATE_TYPE`` (default ``ORDER``) only as an aggregate type the
tables can store, and refuses
out-of-range numbers, an unknown unseen-aggregate policy, an unsupported
database scheme, retry delays that are not positive, finite (7 days at most) and
increasing, a ``DEDUP_RETENTION`` under an hour (a bare number is seconds: ``30`` meant
as days would let every redelivery apply again), an ``ORDER_TOPIC`` or ``APP_ID``
that is no Kafka topic name, a back-off whose first wait is longer than its longest, and a
``RELAY_STALL_SECONDS`` an idle relay's poll would reach (``/ready`` red between two
polls), with a ``ValidationError`` at start-up.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from app.db.timeouts import DbTimeouts
from app.settings import (
    DEFAULT_DATABASE_URL,
    Settings,
    UnseenAggregatePolicy,
    get_settings,
    url_secrets,
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No setting leaks in from the machine running the tests, and the cache starts empty."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_defaults() -> None:
    settings = Settings()

    assert settings.database_url == DEFAULT_DATABASE_URL
    assert settings.broker_url == "kafka://localhost:9092"
    assert settings.redis_url is None
    assert settings.group_instance_id is None
    assert settings.order_topic == "order-event-topic"
    assert settings.batch_size == 2000
    assert settings.batch_wait_seconds == 0.005
    assert settings.fetch_max_wait_ms == 50
    assert settings.fetch_min_bytes == 65_536
    assert settings.gc_young_threshold == 20_000
    assert settings.unseen_aggregate_policy is UnseenAggregatePolicy.FROM_ONE
    assert settings.migrate_on_start is True
    assert settings.handler_module_names == ["handlers"]
    assert settings.consumer_names == []
    assert settings.retry_delay_seconds == (1.0, 5.0, 30.0, 300.0)
    assert settings.db_timeouts == DbTimeouts(connect=10.0, statement=30.0, response=35.0)
    assert settings.ready_stall_seconds == 60.0
    assert settings.infra_retry_jitter == 0.5
    assert settings.escalate_after_attempts == 3
    assert settings.default_aggregate_type == "ORDER"


def test_the_worker_waits_longer_for_an_answer_than_the_server_lets_a_statement_run() -> None:
    with pytest.raises(ValidationError, match="DB_RESPONSE_TIMEOUT_SECONDS must be longer"):
        Settings(db_statement_timeout_seconds=30, db_response_timeout_seconds=30)

    assert Settings(db_statement_timeout_seconds=0, db_response_timeout_seconds=5).db_timeouts == (
        DbTimeouts(connect=10.0, statement=0.0, response=5.0)
    )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            {"infra_retry_initial_seconds": 60, "infra_retry_max_seconds": 30},
            "INFRA_RETRY_INITIAL_SECONDS must not be longer than INFRA_RETRY_MAX_SECONDS",
        ),
        (
            {"relay_backoff_initial_seconds": 600},
            "RELAY_BACKOFF_INITIAL_SECONDS must not be longer than RELAY_BACKOFF_MAX_SECONDS",
        ),
        (
            {"relay_idle_poll_max_seconds": 200},
            "RELAY_STALL_SECONDS must be more than twice RELAY_IDLE_POLL_MAX_SECONDS",
        ),
        ({"relay_stall_seconds": 0.1}, "RELAY_STALL_SECONDS must be more than twice"),
    ],
)
def test_settings_that_contradict_each_other_are_refused(
    given: dict[str, float], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        Settings(**given)


@pytest.mark.parametrize("value", ["-1", "-5m"])
def test_a_negative_duration_is_named_as_negative(value: str) -> None:
    with pytest.raises(ValidationError, match="must not be negative"):
        Settings(cleanup_interval=value)


def test_values_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://eo:secret@db:5432/orders")
    monkeypatch.setenv("batch_size", "750")
    monkeypatch.setenv("UNSEEN_AGGREGATE_POLICY", "from-first-seen")
    monkeypatch.setenv("MIGRATE_ON_START", "false")
    monkeypatch.setenv("HANDLER_MODULES", "handlers.points, handlers.inventory ,,")
    monkeypatch.setenv("REDIS_URL", "")
    monkeypatch.setenv("GROUP_INSTANCE_ID", "")
    monkeypatch.setenv("CONSUMERS", " points-service,, inventory-service")
    monkeypatch.setenv("DEFAULT_AGGREGATE_TYPE", "Payment")

    settings = Settings()

    assert settings.database_url == "postgresql+asyncpg://eo:secret@db:5432/orders"
    assert settings.batch_size == 750
    assert settings.unseen_aggregate_policy is UnseenAggregatePolicy.FROM_FIRST_SEEN
    assert settings.migrate_on_start is False
    assert settings.handler_module_names == ["handlers.points", "handlers.inventory"]
    assert settings.consumer_names == ["points-service", "inventory-service"]
    assert settings.redis_url is None
    assert settings.default_aggregate_type == "Payment"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://u:p@db/orders", "mysql+aiomysql://u:p@db/orders"),
        ("sqlite:///./x.db", "sqlite+aiosqlite:///./x.db"),
        ("postgresql+asyncpg://u@db/o", "postgresql+asyncpg://u@db/o"),
    ],
)
def test_the_database_url_gets_an_async_driver(url: str, expected: str) -> None:
    assert Settings(database_url=url).database_url == expected


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("database_url", "oracle://u@db/orders"),
        ("database_url", "orders.db"),
        ("batch_size", 0),
        ("batch_size", 100_001),
        ("batch_wait_seconds", 0),
        ("batch_wait_seconds", 61),
        ("fetch_min_bytes", 0),
        ("order_topic_partitions", 0),
        ("infra_retry_initial_seconds", 0),
        ("db_pool_size", 0),
        ("db_connect_timeout_seconds", 0),
        ("db_statement_timeout_seconds", -1),
        ("ready_stall_seconds", 0),
        ("infra_retry_jitter", 1.5),
        ("escalate_after_attempts", 0),
        ("unseen_aggregate_policy", "sometimes"),
        ("retry_delays", "0,5"),
        ("retry_delays", "-1"),
        ("retry_delays", "5,1"),
        ("retry_delays", "1,1"),
        ("retry_delays", "1s,5s"),
        ("retry_delays", "nan"),
        ("retry_delays", "1,inf"),
        ("retry_delays", "1e12"),
        ("retry_delays_retired", "x"),
        ("retry_delays_retired", "30,5"),
        ("dedup_retention", "30"),  # seconds: every redelivery a day later applies again
        ("dedup_retention", "0"),
        ("dedup_retention", "59m"),
        ("dedup_retention", "99999999999d"),  # beyond a timedelta: was an OverflowError
        ("outbox_retention", "1e300"),
        ("broker_url", "kafka://broker:9o92"),
        ("broker_url", "kafka://"),
        ("order_topic", "bad topic!"),
        ("order_topic", "orders/eu"),
        ("app_id", "orders service"),
        ("app_id", ""),
        ("redis_url", "redis://:pw@127.0.0.1:6379/0?socket_timeout=abc"),
        ("redis_url", "redis://:pw@127.0.0.1:6379/notadb"),  # redis-py took it for db 0
        ("redis_url", "redis://127.0.0.1:6379/1/2"),
        ("default_aggregate_type", ""),
        ("default_aggregate_type", "x" * 101),
        ("default_aggregate_type", "ORDER\x00"),
    ],
)
def test_bad_values_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: value})


@pytest.mark.parametrize(
    ("text", "delays"),
    [("1, 10 ,60", (1.0, 10.0, 60.0)), ("0.5", (0.5,)), ("", ()), (" , ", ())],
)
def test_retry_delays_are_the_tiers_in_seconds(
    monkeypatch: pytest.MonkeyPatch, text: str, delays: tuple[float, ...]
) -> None:
    monkeypatch.setenv("RETRY_DELAYS", text)

    assert Settings().retry_delay_seconds == delays


def test_get_settings_reads_the_environment_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCH_SIZE", "7")
    first = get_settings()
    monkeypatch.setenv("BATCH_SIZE", "8")

    assert get_settings() is first
    assert first.batch_size == 7


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("postgresql://postgres:S3cr3t#x@127.0.0.1/orders", "S3cr3t#x"),
        ("postgresql://postgres:a/b?c@127.0.0.1/orders", "a/b?c"),
        ("postgresql://postgres:p%40ss@127.0.0.1/orders", "p@ss"),
    ],
)
def test_every_password_a_database_url_holds_is_a_secret(url: str, secret: str) -> None:
    assert secret in Settings(database_url=url).secrets


def test_the_client_keys_password_is_a_secret() -> None:
    url = "postgresql://u@h/orders?sslmode=require&sslcert=/c&sslkey=/k&sslpassword=hunter%232"
    assert {"hunter%232", "hunter#2"} <= set(url_secrets(url))


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379", "redis://127.0.0.1:6379/", "rediss://h:6380/15"]
)
def test_a_redis_url_naming_a_database_by_number_or_none_is_taken(url: str) -> None:
    assert Settings(redis_url=url).redis_url == url


def test_a_redis_password_with_a_reserved_character_is_a_secret() -> None:
    assert "pw#1" in Settings(redis_url="redis://:pw%231@127.0.0.1:6379/0").secrets


def test_a_retired_retry_tier_still_routed_to_is_refused() -> None:
    with pytest.raises(
        ValidationError, match="RETRY_DELAYS_RETIRED names tiers RETRY_DELAYS still"
    ):
        Settings(retry_delays="1,5,30", retry_delays_retired="5")
    settings = Settings(retry_delays="1,60", retry_delays_retired="5,30")
    assert settings.retired_retry_delay_seconds == (5.0, 30.0)
    assert Settings().retired_retry_delay_seconds == ()


def test_a_handler_timeout_within_the_databases_answer_is_refused() -> None:
    with pytest.raises(ValidationError, match="HANDLER_TIMEOUT_SECONDS must be 0"):
        Settings(handler_timeout_seconds=30)
    assert Settings(handler_timeout_seconds=0).handler_timeout_seconds == 0
    assert Settings().handler_timeout_seconds == 120
