"""Own faust's acknowledgements.

faust acks every event of a ``take_events`` batch in a ``finally`` block, also
when the body raised or was cancelled (worker shutdown, crash of the agent).
An acked offset is committed soon after, so an event that never reached the
database would be lost. ``withhold`` marks such events as settled in faust's
own bookkeeping without recording their offsets, so that faust neither
commits them nor waits for them at shutdown; the next owner of the partition
reads them again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def withhold(events: Iterable[Any]) -> None:
    """Keep faust from committing the offsets of ``events`` (not processed to the end)."""
    for event in events:
        # Message.ack() is a no-op once ``acked`` is set, so the consumer's
        # committable offsets never include this message.
        event.message.acked = True
