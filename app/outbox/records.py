"""The worker's own retry and dead-letter records as outbox rows, byte for byte.

A retry-tier or DLT record carries the original record's key, value and
headers unchanged (``dlq.records``). JSON text cannot hold arbitrary bytes, so
such a row keeps them in ``record_key`` and ``record_value`` (binary) and
``record_headers`` (a JSON list of ``[name, base64 value]``, repeats and order
kept, the format of ``parked_event`` and ``failed_event``); a row with
``record_headers`` set is sent from those columns alone. ``payload`` holds a
short JSON description for people reading the table; it is never sent.

Their ``aggregate_type`` is ``effectively-once`` and their ``aggregate_id`` the
failed event's eventId (their own when it has none or it is too long), so they
never wait for a business aggregate's rows, nor hold them up; the records of
one failed event go out in the order they were written, as they are written
one after the other anyway (a retry is consumed before its next trip is decided).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from app.db.tables import OUTBOX_AGG_ID
from app.outbox.event import new_event_id
from app.outbox.status import RECORD_AGGREGATE_TYPE, OutboxStatus
from app.records import headers_to_json
from dlq.records import OutRecord

RETRY = "retry"
DEAD_LETTER = "dead-letter"


def record_row(
    out: OutRecord,
    kind: str,
    event_id: str | None,
    about: Mapping[str, Any],
    now: datetime,
) -> dict[str, Any]:
    """The outbox row that ships ``out``: ``kind`` is ``retry`` or ``dead-letter``,
    ``event_id`` the failed event's (None: unreadable), ``about`` what ``payload`` says."""
    own_id = new_event_id()
    aggregate_id = event_id if event_id and len(event_id) <= OUTBOX_AGG_ID else own_id
    return {
        "event_id": own_id,
        "aggregate_type": RECORD_AGGREGATE_TYPE,
        "aggregate_id": aggregate_id,
        "event_type": kind,
        "topic": out.topic,
        "event_key": None,
        "payload": orjson.dumps({"eventId": event_id, **about}).decode(),
        "headers": None,
        "aggregate_version": None,
        "status": OutboxStatus.PENDING.value,
        "retry_count": 0,
        "created_at": now,
        "updated_at": now,
        "record_key": out.key,
        "record_value": out.value,
        "record_headers": headers_to_json(out.headers),
    }
