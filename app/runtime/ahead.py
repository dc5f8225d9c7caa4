"""Records decoded ahead of their batch, while the batch in hand waits on the database.

A consumer batch is a chain of statements; between them the event loop waits for
the database (about 40% of the worker's main thread in the one-consumer benchmark).
The batch reader (``batches.run_batches``) takes the next batch's events meanwhile,
and hands each chunk it takes to ``Ahead.prepare``, which turns the messages into
records and decodes them there, a slice of ``SLICE`` at a time: between slices the
loop answers whatever is ready, so a database reply waits for one slice at most,
not for a batch's decoding. ``take`` hands a batch's records and decodes to the
processor; a message never prepared is decoded then.

Decoding is a pure function of the record's bytes (``pipeline.decode``), so a record
decoded early decodes as it would have in its batch. Each entry holds its message,
so the message's ``id()`` cannot be reused while the entry waits; ``take`` removes
the entries of its batch, and the events still pending when the agent stops go with
it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from app.pipeline.decode import Decoded, Poison
from app.records import RawRecord
from app.runtime.records import to_record

# Records decoded between two turns of the event loop: about 70 us of work.
SLICE = 8
Decode = Callable[[RawRecord], Decoded | Poison]


class Ahead:
    """Records of messages taken for a later batch, decoded when ``decode`` is given
    (none with the prefilter: Redis is asked first, which decodes less)."""

    def __init__(self, decode: Decode | None, slice_size: int = SLICE) -> None:
        self._decode = decode
        self._slice = slice_size
        self._ahead: dict[int, tuple[Any, RawRecord, Decoded | Poison | None]] = {}

    def __len__(self) -> int:
        return len(self._ahead)

    async def prepare(self, messages: list[Any]) -> None:
        """Record and decode ``messages``, yielding to the event loop every ``SLICE``."""
        decode = self._decode
        for done, message in enumerate(messages, 1):
            record = to_record(message)
            self._ahead[id(message)] = (message, record, decode(record) if decode else None)
            if done % self._slice == 0:
                await asyncio.sleep(0)

    def take(self, messages: list[Any]) -> tuple[list[RawRecord], list[Decoded | Poison] | None]:
        """The records of ``messages`` and, when decoding, their decodes (both in order)."""
        records: list[RawRecord] = []
        decoded: list[Decoded | Poison] = []
        for message in messages:
            entry = self._ahead.pop(id(message), None)
            if entry is None:
                record = to_record(message)
                found = self._decode(record) if self._decode else None
            else:
                _, record, found = entry
            records.append(record)
            if found is not None:
                decoded.append(found)
        return records, decoded if self._decode else None
