"""The one settings object, read from the environment and validated at start-up.

Every field is documented in the README with its default. The names of the
environment variables are a public contract: renaming one is a breaking change.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.broker_settings import BrokerSecuritySettings
from app.broker_url import check_broker_url
from app.db.tables import AGG_TYPE, OUTBOX_TOPIC
from app.db.timeouts import DbTimeouts
from app.db.urls import normalise_database_url
from app.extras import require
from app.failure_detail import FailureDetail
from dlq.topics import delay_label, dlt_topic, retry_topic, topic_name
from schemas.ids import NO_CONTROL_CHARACTERS

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./effectively_once.db"
DEFAULT_AGGREGATE_TYPE = "ORDER"
"""The ``aggregateType`` of an event that names none, in its value or a header."""
_DURATION = re.compile(r"^(-?\d+(?:\.\d+)?)([smhd]?)$")
_KAFKA_NAME = topic_name()
_SSL_PASSWORD = re.compile(r"[?&]sslpassword=([^&]*)")
DEDUP_RETENTION_FLOOR = timedelta(hours=1)
MAX_RETRY_DELAY_SECONDS = 7 * 86_400.0
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


class UnseenAggregatePolicy(StrEnum):
    """Where the version gate starts for an aggregate it has never seen.

    ``from-one``: only version 1 applies; a later version waits (parked) for
    the versions before it. Right for a consumer that reads the topic from its
    beginning.
    ``from-first-seen``: the first version seen is accepted as the start. Right
    for a consumer deployed against a topic whose early history is gone.
    """

    FROM_ONE = "from-one"
    FROM_FIRST_SEEN = "from-first-seen"


DEFAULT_APP_ID = "order-consumers"
DEFAULT_HANDLER_TIMEOUT_SECONDS = 120.0
"""The consumer group (and deployment) of a worker given no ``APP_ID``."""


class Settings(BaseSettings, BrokerSecuritySettings):
    """Runtime configuration of a worker (see README, "Settings"); the broker security
    settings come from ``BrokerSecuritySettings``."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    broker_url: str = "kafka://localhost:9092"
    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str | None = None
    order_topic: str = "order-event-topic"
    order_topic_partitions: int = Field(default=8, ge=1)
    topic_replication_factor: int = Field(default=1, ge=1, le=32)
    topics_declare: bool = True
    group_instance_id: str | None = Field(default=None, min_length=1, max_length=249)
    app_id: str = DEFAULT_APP_ID
    handler_modules: str = "handlers"
    consumers: str = ""
    batch_size: int = Field(default=2_000, ge=1, le=100_000)
    batch_wait_seconds: float = Field(default=0.005, gt=0, le=60)
    fetch_max_wait_ms: int = Field(default=50, ge=0, le=60_000)
    fetch_min_bytes: int = Field(default=65_536, ge=1, le=52_428_800)
    gc_young_threshold: int = Field(default=20_000, ge=0)
    unseen_aggregate_policy: UnseenAggregatePolicy = UnseenAggregatePolicy.FROM_ONE
    default_aggregate_type: str = Field(
        default=DEFAULT_AGGREGATE_TYPE,
        min_length=1,
        max_length=AGG_TYPE,
        pattern=NO_CONTROL_CHARACTERS,
    )
    migrate_on_start: bool = True
    broker_session_timeout_seconds: float = Field(default=10.0, gt=0)
    infra_retry_initial_seconds: float = Field(default=0.5, gt=0)
    infra_retry_max_seconds: float = Field(default=30.0, gt=0)
    infra_retry_jitter: float = Field(default=0.5, ge=0, le=1)
    escalate_after_attempts: int = Field(default=3, ge=1)
    db_pool_size: int = Field(default=5, ge=1)
    db_connect_timeout_seconds: float = Field(default=10.0, gt=0)
    db_statement_timeout_seconds: float = Field(default=30.0, ge=0)
    db_response_timeout_seconds: float = Field(default=35.0, gt=0)
    db_session_probe_seconds: float = Field(default=5.0, ge=0)
    ready_stall_seconds: float = Field(default=60.0, gt=0)
    log_format: Literal["text", "json"] = "text"
    failure_detail: FailureDetail = FailureDetail.MESSAGE
    retry_delays: str = "1,5,30,300"
    retry_delays_retired: str = ""
    handler_timeout_seconds: float = Field(default=DEFAULT_HANDLER_TIMEOUT_SECONDS, ge=0)
    prefilter_key_prefix: str = "eo:applied"
    prefilter_ttl_seconds: int = Field(default=86_400, ge=1)
    prefilter_timeout_seconds: float = Field(default=0.05, gt=0)
    prefilter_failure_threshold: int = Field(default=5, ge=1)
    prefilter_cooldown_seconds: float = Field(default=30.0, ge=0)
    relay_enabled: bool = True
    relay_batch_size: int = Field(default=2_000, ge=1, le=50_000)
    relay_max_attempts: int = Field(default=10, ge=1)
    relay_lease_seconds: float = Field(default=60.0, ge=1)
    relay_poll_interval_seconds: float = Field(default=0.05, gt=0, le=60)
    relay_idle_poll_max_seconds: float = Field(default=0.25, gt=0, le=300)
    relay_stall_seconds: float = Field(default=120.0, gt=0)
    relay_backoff_initial_seconds: float = Field(default=1.0, gt=0)
    relay_backoff_max_seconds: float = Field(default=300.0, gt=0)
    relay_idempotent: bool = True
    relay_stop_grace_seconds: float = Field(default=5.0, ge=0, le=300)
    relay_metrics_port: int = Field(default=6067, ge=0, le=65_535)
    relay_metrics_bind: str = Field(default="0.0.0.0", min_length=1)
    outbox_retention: timedelta = timedelta(days=7)
    dedup_retention: timedelta = timedelta(days=30)
    cleanup_interval: timedelta = timedelta(0)
    cleanup_batch_size: int = Field(default=1_000, ge=1, le=100_000)
    cleanup_pause_seconds: float = Field(default=0.1, ge=0)

    @field_validator("broker_url")
    @classmethod
    def _brokers_named(cls, value: str) -> str:
        check_broker_url(value)
        return value

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        return normalise_database_url(value)

    @field_validator("failure_detail", mode="before")
    @classmethod
    def _detail_in_any_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("group_instance_id", mode="before")
    @classmethod
    def _blank_instance_is_unset(cls, value: object) -> object:
        # GROUP_INSTANCE_ID= (a manifest's empty value): no static membership, as unset.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("redis_url")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        if value:
            check_redis_url(value)
        return value or None

    @model_validator(mode="after")
    def _answer_outlasts_the_statement(self) -> Settings:
        if self.db_response_timeout_seconds <= self.db_statement_timeout_seconds:
            raise ValueError(
                "DB_RESPONSE_TIMEOUT_SECONDS must be longer than DB_STATEMENT_TIMEOUT_SECONDS "
                "(the server cancels a slow statement and answers; the worker gives up on a "
                "connection that does not answer)"
            )
        return self

    @model_validator(mode="after")
    def _handlers_outlast_the_database(self) -> Settings:
        limit = self.handler_timeout_seconds
        if limit and limit <= self.db_response_timeout_seconds:
            raise ValueError(
                "HANDLER_TIMEOUT_SECONDS must be 0 (no limit) or longer than "
                "DB_RESPONSE_TIMEOUT_SECONDS (a database that does not answer is an outage, "
                "paused on; a handler cut off first would fail its event instead)"
            )
        return self

    @model_validator(mode="after")
    def _backoffs_start_below_their_caps(self) -> Settings:
        for start, cap in (
            ("infra_retry_initial_seconds", "infra_retry_max_seconds"),
            ("relay_backoff_initial_seconds", "relay_backoff_max_seconds"),
        ):
            if getattr(self, start) > getattr(self, cap):
                raise ValueError(
                    f"{start.upper()} must not be longer than {cap.upper()} (the first wait "
                    "would be cut to the longest one)"
                )
        return self

    @model_validator(mode="after")
    def _relay_stall_outlasts_its_idle_poll(self) -> Settings:
        if self.relay_stall_seconds <= 2 * self.relay_idle_poll_max_seconds:
            raise ValueError(
                "RELAY_STALL_SECONDS must be more than twice RELAY_IDLE_POLL_MAX_SECONDS (an idle "
                "relay ends a cycle only every RELAY_IDLE_POLL_MAX_SECONDS: /ready would turn red "
                "between two of them)"
            )
        return self

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret a setting holds (the broker's passwords, the passwords in
        ``DATABASE_URL`` and ``REDIS_URL``), as written and URL-decoded: no failure record
        or log line may show them (``app.scrub``)."""
        found = [
            secret.get_secret_value()
            for secret in (self.broker_sasl_password, self.broker_ssl_key_password)
            if secret is not None
        ]
        for url in (self.database_url, self.redis_url):
            found += url_secrets(url) if url else []
        return tuple(dict.fromkeys(found))

    @property
    def db_timeouts(self) -> DbTimeouts:
        """The bounds of every connection the worker makes (``app.db.timeouts``)."""
        return DbTimeouts(
            connect=self.db_connect_timeout_seconds,
            statement=self.db_statement_timeout_seconds,
            response=self.db_response_timeout_seconds,
            probe_after=self.db_session_probe_seconds,
        )

    @field_validator("order_topic", "app_id")
    @classmethod
    def _kafka_name(cls, value: str) -> str:
        """Kafka's topic names take only ASCII letters, digits, ``.``, ``_`` and ``-`` (faust
        names topics after ``APP_ID`` too): anything else is refused at start, here."""
        if not _KAFKA_NAME.fullmatch(value):
            raise ValueError(
                "must be 1 to 249 of the characters a Kafka topic name takes: ASCII letters, "
                "digits, '.', '_' and '-'"
            )
        return value

    @field_validator("order_topic")
    @classmethod
    def _topic_fits(cls, value: str) -> str:
        longest = max(
            [dlt_topic(value), *(retry_topic(value, d) for d in (0.5, 86_400.5))], key=len
        )
        if not value or len(longest) > OUTBOX_TOPIC:
            raise ValueError(
                f"ORDER_TOPIC must be short enough that its retry and DLT topics fit in "
                f"{OUTBOX_TOPIC} characters (the outbox's topic column), got {len(value)}"
            )
        return value

    @field_validator("outbox_retention", "dedup_retention", "cleanup_interval", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        """``30s``, ``15m``, ``12h``, ``7d`` or plain seconds, besides ISO-8601 (``P7D``)."""
        if isinstance(value, str):
            found = _DURATION.match(value.strip())
            if found:
                try:
                    return timedelta(seconds=float(found[1]) * _UNIT_SECONDS[found[2] or "s"])
                except OverflowError:
                    raise ValueError("is longer than a duration can be (999999999 days)") from None
        return value

    @field_validator("outbox_retention", "dedup_retention", "cleanup_interval")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        if value < timedelta(0):
            raise ValueError("must not be negative")
        return value

    @field_validator("dedup_retention")
    @classmethod
    def _keeps_dedup_records(cls, value: timedelta) -> timedelta:
        if value < DEDUP_RETENTION_FLOOR:
            raise ValueError(
                "must be at least 1h (a bare number is seconds: write 30d): an event redelivered "
                "or replayed after its dedup record was deleted applies again, so it must "
                "exceed the topic's retention and any replay window"
            )
        return value

    @field_validator("retry_delays")
    @classmethod
    def _delays_parse(cls, value: str) -> str:
        parse_delays(value)
        return value

    @field_validator("retry_delays_retired")
    @classmethod
    def _retired_parse(cls, value: str) -> str:
        parse_delays(value, "RETRY_DELAYS_RETIRED")
        return value

    @model_validator(mode="after")
    def _retired_not_in_use(self) -> Settings:
        used = {delay_label(delay) for delay in self.retry_delay_seconds}
        both = [delay_label(d) for d in self.retired_retry_delay_seconds if delay_label(d) in used]
        if both:
            raise ValueError(
                f"RETRY_DELAYS_RETIRED names tiers RETRY_DELAYS still routes to: {', '.join(both)}"
            )
        return self

    @property
    def retry_delay_seconds(self) -> tuple[float, ...]:
        """The retry tiers, in seconds, shortest first (may be empty: failures go to the DLT)."""
        return parse_delays(self.retry_delays)

    @property
    def retired_retry_delay_seconds(self) -> tuple[float, ...]:
        """Retry tiers no failure is routed to any more, still read until they are empty
        (``RETRY_DELAYS`` changed while records waited in them)."""
        return parse_delays(self.retry_delays_retired, "RETRY_DELAYS_RETIRED")

    @property
    def read_retry_delay_seconds(self) -> tuple[float, ...]:
        """Every retry tier the worker reads: ``RETRY_DELAYS``' and the retired ones."""
        return (*self.retry_delay_seconds, *self.retired_retry_delay_seconds)

    @property
    def handler_module_names(self) -> list[str]:
        """The modules imported at start so that their ``@handler``s register."""
        return _names(self.handler_modules)

    @property
    def consumer_names(self) -> list[str]:
        """The consumers this worker runs; empty: every one its handler modules register."""
        return _names(self.consumers)


def describe(exc: ValidationError) -> list[str]:
    """``VARIABLE: what is wrong``, one line per mistake; never the value (it may be a secret)."""
    lines = []
    for error in exc.errors():
        where = ".".join(map(str, error["loc"])).upper()
        lines.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return lines


REDIS_SCHEMES = ("redis", "rediss", "unix")


def check_redis_url(url: str) -> None:
    """``ValueError`` (without quoting ``url``, which may hold a password) unless redis-py
    can read it: one of its schemes, and a numeric port; redis-py installed."""
    parts = urlsplit(url)
    if parts.scheme not in REDIS_SCHEMES:
        raise ValueError(
            f"not a Redis URL: expected {', '.join(s + '://' for s in REDIS_SCHEMES)} "
            "(the value is not shown: it may hold a password)"
        )
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked for it
    except ValueError:
        raise ValueError(
            "the port of the Redis URL is not a number between 0 and 65535 (a password holding "
            "'#', '?' or '/' must be written percent-encoded: %23, %3F, %2F)"
        ) from None
    database = parts.path.strip("/")
    if parts.scheme != "unix" and database and not database.isdigit():
        # redis-py ignores such a path: the prefilter would share database 0 unasked.
        raise ValueError(
            "the path of the Redis URL names no database: write /<number> (e.g. /0), or "
            "nothing for database 0"
        )
    require("redis", "redis", "REDIS_URL")
    from redis.connection import parse_url

    try:
        parse_url(url)
    except ValueError as exc:  # its query's values: redis-py's message quotes no password
        raise ValueError(f"redis-py cannot read the Redis URL: {exc}") from None


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def parse_delays(text: str, name: str = "RETRY_DELAYS") -> tuple[float, ...]:
    """``"1,5,30,300"`` → ``(1.0, 5.0, 30.0, 300.0)``; positive, strictly increasing.
    ``name``: the setting, for the message."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        delays = tuple(float(part) for part in parts)
    except ValueError:
        raise ValueError(f"{name} must be comma-separated seconds, got {text!r}") from None
    if not all(0 < delay <= MAX_RETRY_DELAY_SECONDS for delay in delays):
        raise ValueError(
            f"{name} must be seconds above 0 and at most {MAX_RETRY_DELAY_SECONDS:g} "
            f"(7 days), got {text!r}"
        )
    if list(delays) != sorted(set(delays)):
        raise ValueError(f"{name} must be increasing, got {text!r}")
    return delays


def url_secrets(url: str) -> list[str]:
    """The password of ``url`` (as a URL parser reads it, and as written up to its last
    ``@``, which a parser may read otherwise when it holds ``#``, ``?`` or ``/``) and an
    ``sslpassword`` parameter, each as written and URL-decoded."""
    found = []
    try:
        found.append(urlsplit(url).password or "")
    except ValueError:  # a port that is no number: the parts below still find the password
        pass
    _, sep, rest = url.partition("://")
    userinfo = rest.rpartition("@")[0] if sep else ""
    if ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    found += _SSL_PASSWORD.findall(url)
    return [text for raw in found if raw for text in (raw, unquote(raw))]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
