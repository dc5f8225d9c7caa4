"""faust message → ``RawRecord``."""

from __future__ import annotations

from typing import Any

from app.records import RawRecord


def to_record(message: Any) -> RawRecord:
    """The broker-neutral copy of a faust message."""
    headers = message.headers or ()
    if isinstance(headers, dict):
        headers = headers.items()
    return RawRecord(  # topic, partition, offset, key, value, headers, timestamp_ms
        message.topic,
        message.partition,
        message.offset,
        message.key,
        message.value,
        tuple((str(k), bytes(v) if v is not None else b"") for k, v in headers) if headers else (),
        int(message.timestamp * 1000) if message.timestamp else None,
    )
