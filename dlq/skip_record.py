"""The skip record: makes one consumer take one version of an aggregate without a handler.

``dlq release`` publishes one for each version a producer never sent; ``dlq skip
--for-consumer`` one for poison whose dead-letter headers name its aggregate and version
but that has no envelope the worker can read (an eventId that is no id, a value that is no
JSON object). An envelope of event type ``VersionGivenUp`` (``given_up_id``: the same
record again for the same consumer and version), to the aggregate's topic and partition
and with its key, aimed at the consumer as every record for one consumer is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import orjson

from dlq import headers as h
from dlq.given_up import GIVEN_UP, given_up_id
from dlq.records import OutRecord


@dataclass(frozen=True, slots=True)
class Release:
    """Who gives the versions up, and why: carried in each skip record's ``data``."""

    by: str
    why: str | None = None

    def data(self) -> dict[str, str]:
        """``{"givenUpBy": ..., "why": ...}`` (``why`` only when given)."""
        return {"givenUpBy": self.by, **({"why": self.why} if self.why else {})}


@dataclass(frozen=True, slots=True)
class Aggregate:
    """An aggregate as one consumer reads it: where its records go, and their key."""

    consumer: str
    aggregate_type: str
    aggregate_id: str
    topic: str
    partition: int
    key: bytes | None


def skip_record(
    of: Aggregate, version: int, now: datetime, release: Release, app_id: str | None = None
) -> OutRecord:
    """The record that makes ``of.consumer`` (of the deployment ``app_id``) take ``version``
    without a handler; its ``data`` says who gave the version up, and why."""
    envelope = {
        "eventId": given_up_id(of.consumer, of.aggregate_type, of.aggregate_id, version),
        "eventType": GIVEN_UP,
        "eventVersion": 1,
        "aggregateType": of.aggregate_type,
        "aggregateId": of.aggregate_id,
        "aggregateVersion": version,
        "occurredAt": now.isoformat(),
        "data": release.data(),
    }
    headers = (
        # Where it goes, as every record aimed at one consumer says (``Trip.of`` takes a
        # consumer or an action without it for a producer's header: poison).
        (h.DLT_ORIGINAL_TOPIC, of.topic.encode()),
        (h.DLT_ORIGINAL_PARTITION, str(of.partition).encode()),
        (h.RETRY_CONSUMER_GROUP, of.consumer.encode()),
        (h.RETRY_ACTION, b"skip"),
        *(((h.DLT_APP_ID, app_id.encode()),) if app_id else ()),
    )
    return OutRecord(of.topic, of.key, orjson.dumps(envelope), headers)
