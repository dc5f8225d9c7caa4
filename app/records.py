"""The broker-neutral record the pipeline works on.

The runtime adapter turns whatever its Kafka client hands out into
``RawRecord``s; nothing past the adapter sees a faust type.
"""

from __future__ import annotations

import base64
from typing import NamedTuple

import orjson


class RawRecord(NamedTuple):
    """One Kafka record exactly as it arrived: bytes in, bytes kept.

    (A named tuple: immutable, and built for every record, where a frozen
    dataclass costs several times as much.)
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int | None = None

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, or ``None``."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found

    @property
    def position(self) -> str:
        """``topic[partition]@offset``, for logs and error messages."""
        return f"{self.topic}[{self.partition}]@{self.offset}"


def headers_to_json(headers: tuple[tuple[str, bytes], ...]) -> str:
    """Headers as a JSON text (values base64) for storage next to a parked or failed event."""
    return orjson.dumps(
        [[key, base64.b64encode(value).decode()] for key, value in headers]
    ).decode()


def headers_from_json(text: str) -> tuple[tuple[str, bytes], ...]:
    """The inverse of ``headers_to_json``."""
    return tuple((key, base64.b64decode(value)) for key, value in orjson.loads(text))
