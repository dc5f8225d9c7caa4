"""The chaos soak's outbox source writes rows that the relay turns into the workload's records.

Contract: every record of the workload either becomes one outbox row or goes straight to
the topic. A row is the first send of an event whose value is JSON; what the relay makes
of it (``app.outbox.message.message_of``) has the record's key and value byte for byte and
its ``id`` and ``eventType`` headers (plus ``aggregateType``). Bytes that are not JSON and
the second send of an event go straight to the topic, each in its place of the send order.
"""

from __future__ import annotations

from typing import Any

from app.outbox.message import message_of
from chaos.outbox_source import _split
from chaos.workload import AGGREGATE_TYPE, PoisonKind, Shape, generate

TOPIC = "chaos-orders"


def as_stored(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` as the relay reads it back: the columns it wrote, the rest empty."""
    return {"event_key": None, "headers": None, "record_headers": None, **row}


def test_every_record_is_a_row_or_a_direct_send_and_rows_relay_as_the_record() -> None:
    workload = generate(Shape(events=3_000, aggregates=50))
    rows, direct = _split(workload.records, TOPIC)

    places = sorted([place for place, _ in rows] + [place for place, _ in direct])
    assert places == list(range(len(workload.records)))
    assert [place for place, _ in direct] == sorted(place for place, _ in direct)
    undecodable = [v for v, kind in workload.poison.items() if kind is PoisonKind.UNDECODABLE]
    assert len(direct) == workload.duplicates + len(undecodable)
    assert set(undecodable) <= {record.value for _, record in direct}
    assert len({row["event_id"] for _, row in rows}) == len(rows)
    for place, row in rows:
        record = workload.records[place]
        message = message_of(as_stored(row))
        assert (message.topic, message.key, message.value) == (TOPIC, record.key, record.value)
        assert set(record.headers) < set(message.headers)
        assert ("aggregateType", AGGREGATE_TYPE.encode()) in message.headers
