"""Own faust's acknowledgements.

The adapter acks a batch's events itself, after the batch's commit
(``batches.run_batches``). Events that never finished (the worker is stopping,
a bug crashed the agent) must not be acked, and must not make faust wait for
them either: ``withhold`` marks them as settled in faust's own bookkeeping
without recording their offsets, so that faust neither commits them nor waits
for them at shutdown or rebalance; the next owner of the partition reads them again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def withhold(messages: Iterable[Any]) -> None:
    """Keep faust from committing the offsets of ``messages`` (not processed to the end)."""
    for message in messages:
        # Message.ack() is a no-op once ``acked`` is set, so the consumer's
        # committable offsets never include this message.
        message.acked = True
