"""Records decoded ahead of their batch decode as they would have in it.

Contract of ``app.runtime.ahead.Ahead``:
- ``take(messages)`` returns each message's record and decode, in the messages' order,
  the same whether ``prepare`` saw the message or not (a message never prepared is
  decoded then); poison stays poison, in its place;
- ``prepare`` gives the event loop a turn every ``SLICE`` records, so that a database
  reply waits for one slice at most, never for a whole batch's decoding;
- ``take`` removes what it hands out: nothing stays behind a processed batch;
- without a decode (a prefilter is asked first), ``take`` hands out records only.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import orjson

from app.pipeline.decode import Decoded, Poison, decode
from app.records import RawRecord
from app.runtime.ahead import SLICE, Ahead
from app.runtime.records import to_record


def message(offset: int, value: bytes) -> Any:
    """A faust message's fields, as ``to_record`` reads them."""
    return SimpleNamespace(
        topic="orders",
        partition=offset % 3,
        offset=offset,
        key=f"o-{offset}".encode(),
        value=value,
        headers=[("traceparent", b"00-abc-01")],
        timestamp=1_700_000_000.5,
    )


def paid(offset: int) -> bytes:
    return orjson.dumps(
        {
            "eventId": f"e-{offset}",
            "eventType": "OrderPaid",
            "eventVersion": 1,
            "aggregateType": "Order",
            "aggregateId": offset,  # a number, as a Java producer sends it
            "aggregateVersion": 1,
            "occurredAt": "2024-05-01T12:00:00Z",
            "data": {
                "orderId": offset,
                "userId": "u-1",
                "amount": "10.00",
                "paidAt": "2024-05-01T12:00:00Z",
            },
        }
    )


def summary(found: Decoded | Poison) -> tuple[str, str]:
    if isinstance(found, Decoded):
        return ("event", found.event_id)
    return ("poison", type(found.error).__name__)


def batch() -> list[Any]:
    messages = [message(offset, paid(offset)) for offset in range(20)]
    messages[7] = message(7, b"not json")
    return messages


async def test_a_batch_taken_half_prepared_decodes_as_it_would_unprepared() -> None:
    messages = batch()
    ahead = Ahead(decode)
    await ahead.prepare(messages[:12])

    records, decoded = ahead.take(messages)

    assert records == [to_record(m) for m in messages]
    assert decoded is not None
    assert [summary(d) for d in decoded] == [summary(decode(r)) for r in records]
    assert [summary(d) for d in decoded][7] == ("poison", "UndecodableError")
    assert [summary(d) for d in decoded][:3] == [
        ("event", "e-0"),
        ("event", "e-1"),
        ("event", "e-2"),
    ]
    assert [d.record for d in decoded] == records  # each decode is of its own record
    assert len(ahead) == 0


async def test_prepare_lets_the_loop_turn_every_slice() -> None:
    messages = [message(offset, paid(offset)) for offset in range(SLICE * 5)]
    ahead = Ahead(decode)
    turns: list[int] = []

    async def other_work() -> None:  # a database reply, say
        while True:
            turns.append(len(ahead))
            await asyncio.sleep(0)

    other = asyncio.ensure_future(other_work())
    await asyncio.sleep(0)
    await ahead.prepare(messages)
    other.cancel()

    # The other task ran between slices, never more than one slice of decoding apart.
    assert sorted(set(turns)) == [k * SLICE for k in range(6)]


async def test_prepared_entries_leave_with_their_batch() -> None:
    messages = batch()
    ahead = Ahead(decode)
    await ahead.prepare(messages)
    assert len(ahead) == len(messages)

    ahead.take(messages[:5])
    assert len(ahead) == len(messages) - 5
    ahead.take(messages[5:])
    assert len(ahead) == 0


async def test_without_a_decode_only_records_are_handed_out() -> None:
    messages = batch()
    ahead = Ahead(None)
    await ahead.prepare(messages[:4])

    records, decoded = ahead.take(messages)

    assert decoded is None
    assert records == [to_record(m) for m in messages]
    assert all(isinstance(r, RawRecord) for r in records)
