"""One event to add to the outbox: its envelope (what consumers read) and its row.

The envelope is the one our consumers read (``schemas.envelope``): camelCase,
``eventId`` a UUIDv7 unless the caller brings its own, ``occurredAt`` now in UTC
unless given, ``data`` the payload (a mapping or a pydantic model). The row's
``payload`` is that envelope as JSON text, sent verbatim as the record's value;
the record's key is ``key`` (default: the aggregate id).

What the writer takes is what every consumer reads: the built envelope is validated by
the consumers' own model (``schemas.envelope``) on its JSON, so that a field no row can
hold, or no consumer would read (a control character in an id, a version past 32 bits,
an eventType longer than the consumers' column, ``data`` that is no object, a NaN),
raises ``InvalidOutboxEvent`` before anything is written, not poison on the topic. The
headers ``id`` (the relay's) and the framework's ``retry-*`` and ``dlt-*`` are refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
import uuid_utils
from pydantic import BaseModel, ValidationError

from app.db.tables import (
    AGG_TYPE,
    INTEGER_MAX,
    OUTBOX_AGG_ID,
    OUTBOX_EVENT_ID,
    OUTBOX_EVENT_TYPE,
    OUTBOX_KEY,
    OUTBOX_TOPIC,
)
from app.errors import InvalidOutboxEvent
from app.outbox.message import COLUMN_HEADERS
from app.outbox.status import RECORD_AGGREGATE_TYPE, OutboxStatus
from app.registry import TOPIC_NAME
from dlq.headers import is_ours
from schemas.envelope import RawEnvelope


def new_event_id() -> str:
    """A fresh eventId: a UUIDv7 (time-ordered, so ids written together sort together)."""
    return str(uuid_utils.uuid7())


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to publish once the caller's transaction commits.

    ``topic`` is where it goes; ``aggregate_type`` and ``aggregate_id`` are the unit of
    ordering (the relay publishes an aggregate's events in the order they were added);
    ``aggregate_version`` lets consumers put them in order again whatever happens.
    ``aggregate_id``, ``event_id`` and ``key`` may be given as integers (an order's
    numeric primary key): they are kept as their decimal text, as consumers read ids.
    """

    topic: str
    event_type: str
    aggregate_type: str
    aggregate_id: str | int
    data: Mapping[str, Any] | BaseModel
    aggregate_version: int | None = None
    event_version: int = 1
    key: str | int | None = None
    headers: Mapping[str, str] | None = None
    event_id: str | int | None = None
    occurred_at: datetime | None = None
    trace_id: str | None = None
    correlation_id: str | None = None
    causation_id: str | None = None
    tenant_id: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        for name in ("aggregate_id", "event_id", "key"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, str(value))

    def envelope(self, event_id: str, occurred_at: datetime) -> dict[str, Any]:
        """The envelope consumers read, as a camelCase mapping."""
        env: dict[str, Any] = {
            "eventId": event_id,
            "eventType": self.event_type,
            "eventVersion": self.event_version,
            "aggregateType": self.aggregate_type,
            "aggregateId": self.aggregate_id,
        }
        if self.aggregate_version is not None:
            env["aggregateVersion"] = self.aggregate_version
        env["occurredAt"] = iso(occurred_at)
        for name, value in (
            ("traceId", self.trace_id),
            ("correlationId", self.correlation_id),
            ("causationId", self.causation_id),
            ("tenantId", self.tenant_id),
            ("source", self.source),
        ):
            if value is not None:
                env[name] = value
        data = self.data
        env["data"] = (
            data.model_dump(mode="json", by_alias=True) if isinstance(data, BaseModel) else data
        )
        return env

    def row(self, now: datetime) -> dict[str, Any]:
        """The ``outbox_event`` row; raises ``InvalidOutboxEvent`` for what no row can hold."""
        self.check()
        event_id = str(self.event_id or new_event_id())  # text since __post_init__
        envelope = self.envelope(event_id, self.occurred_at or now)
        if not _finite(envelope["data"]):
            raise InvalidOutboxEvent("data holds NaN or an infinity, which JSON cannot")
        try:
            payload = orjson.dumps(envelope, default=_json)
        except orjson.JSONEncodeError as exc:
            raise InvalidOutboxEvent(f"data is not JSON-serialisable: {exc}") from None
        _readable(payload)
        return {
            "event_id": event_id,
            "aggregate_type": self.aggregate_type,
            "aggregate_id": self.aggregate_id,
            "event_type": self.event_type,
            "topic": self.topic,
            "event_key": self.key,
            "payload": payload.decode(),
            "headers": orjson.dumps(dict(self.headers)).decode() if self.headers else None,
            "aggregate_version": self.aggregate_version,
            "status": OutboxStatus.PENDING.value,
            "retry_count": 0,
            "created_at": now,
            "updated_at": now,
        }

    def check(self) -> None:
        """Raise ``InvalidOutboxEvent`` naming every field the row cannot take."""
        problems = [
            f"{name} must be text of 1 to {limit} characters (or an integer), got {value!r}"
            for name, value, limit in (
                ("topic", self.topic, OUTBOX_TOPIC),
                ("event_type", self.event_type, OUTBOX_EVENT_TYPE),
                ("aggregate_type", self.aggregate_type, AGG_TYPE),
                ("aggregate_id", self.aggregate_id, OUTBOX_AGG_ID),
                ("event_id", self.event_id, OUTBOX_EVENT_ID),
                ("key", self.key, OUTBOX_KEY),
            )
            if (value is not None or name not in ("event_id", "key"))
            and not (isinstance(value, str) and 0 < len(value) <= limit)
        ]
        if isinstance(self.topic, str) and self.topic and not TOPIC_NAME.fullmatch(self.topic):
            problems.append(
                f"topic {self.topic!r} is no Kafka topic name (letters, digits, '.', '_', '-')"
            )
        if self.aggregate_type == RECORD_AGGREGATE_TYPE:
            problems.append(f"aggregate_type {RECORD_AGGREGATE_TYPE!r} is the framework's own")
        for name, version in (
            ("aggregate_version", self.aggregate_version),
            ("event_version", self.event_version),
        ):
            if version is None:
                continue
            if type(version) is not int or version > INTEGER_MAX:
                problems.append(f"{name} must be an integer of at most {INTEGER_MAX}")
            elif version < 1:
                problems.append(f"{name} counts from 1, got {version}")
        if self.headers is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.headers.items()
        ):
            problems.append("headers must map header names to text values")
        elif self.headers is not None:
            reserved = sorted(k for k in self.headers if k in COLUMN_HEADERS or is_ours(k))
            if reserved:
                problems.append(
                    f"headers {', '.join(map(repr, reserved))} are the framework's own (the "
                    "relay sets id, eventType and aggregateType from the event's; retry-* and "
                    "dlt-* mark retry and DLT records)"
                )
        if problems:
            raise InvalidOutboxEvent("; ".join(problems))


def _finite(value: Any) -> bool:
    """False when ``value`` holds a float that is NaN or infinite (orjson writes ``null``)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(item) for item in value)
    return True


def _readable(payload: bytes) -> None:
    """Raise ``InvalidOutboxEvent`` unless the consumers read ``payload``'s envelope as one:
    their own model (``schemas.envelope``), on the JSON as they receive it."""
    try:
        RawEnvelope.model_validate_json(payload)
    except ValidationError as exc:
        said = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: {error['msg']}"
            for error in exc.errors(include_url=False)[:3]
        )
        raise InvalidOutboxEvent(f"the envelope would be poison to its consumers: {said}") from None


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC with milliseconds, as producers write ``occurredAt``."""
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json(value: Any) -> Any:
    """What orjson leaves out: a ``Decimal`` as its exact text (amounts keep their cents)."""
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} into an event's data: {value!r}")
