"""The broker-neutral record the pipeline works on.

The runtime adapter turns whatever its Kafka client hands out into
``RawRecord``s; nothing past the adapter sees a faust type.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One Kafka record exactly as it arrived: bytes in, bytes kept."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = field(default=())
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
