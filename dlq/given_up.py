"""The skip records ``dlq release`` publishes: their event type and the eventId each derives.

Each is an envelope of event type ``VersionGivenUp`` whose ``eventId`` is derived from the
consumer, the aggregate and the version (``given_up_id``): releasing twice publishes the
same event again, and a record a producer wrote cannot pass for one by chance.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

GIVEN_UP = "VersionGivenUp"
_IDS = uuid.UUID("5b0e1f2a-9a44-4c61-9a51-6c0f3e2d7a10")  # namespace of the skip records' ids


def given_up_id(consumer: str, aggregate_type: str, aggregate_id: str, version: int) -> str:
    """The eventId of the skip record that gives ``version`` of the aggregate up for
    ``consumer``."""
    return str(uuid.uuid5(_IDS, "\0".join((consumer, aggregate_type, aggregate_id, str(version)))))


def is_given_up(value: bytes | None, consumer: str) -> bool:
    """Whether ``value`` is the envelope of a skip record ``dlq release`` published for
    ``consumer`` (its type ``VersionGivenUp``, its eventId the one derived for it)."""
    try:
        envelope: Any = orjson.loads(value or b"")
        return envelope["eventType"] == GIVEN_UP and envelope["eventId"] == given_up_id(
            consumer,
            envelope["aggregateType"],
            envelope["aggregateId"],
            envelope["aggregateVersion"],
        )
    except (ValueError, TypeError, KeyError):
        return False
