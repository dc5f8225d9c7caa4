"""Which offset of a partition may be committed: none past a record not yet acknowledged.

faust keeps, per partition, the offsets acknowledged since the last commit and the
"gaps" (offsets the fetch skipped: records the broker never returns, such as
transaction markers), and commits the end of the first run of consecutive ones. Its
committed offset is Kafka's: the next offset to read. Two of its checks are off by
one, and each can commit past a record nobody processed, which the group then never
reads again:

- a gap from the last record read to the next one read is recorded up to and
  including the next one (``_add_gap(tp, read + 1, offset)`` with an inclusive end):
  that record counts as done before it was processed;
- a run that starts one past the committed offset is committed (``min(acked) -
  committed > 1``, and not checked at all while the committed offset is 0): the
  record at the committed offset is skipped when it alone was never acknowledged.

Here a gap ends before the record that was read, the offset before the committed one
counts as the last read after a seek (so a record missing at the committed offset is
a gap), and nothing is committed while the record at the committed offset is neither
acknowledged nor a gap. A partition with no committed offset yet (the group's first
minutes) is read from its earliest offset, and that offset stands in for the committed
one (``with_floor``): faust checks nothing there, so any run of acknowledged offsets
was committed, whatever came before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faust.utils.functional import consecutive_numbers


def with_floor(
    committed: Mapping[Any, int | None], earliest: Mapping[Any, int]
) -> dict[Any, int | None]:
    """``committed`` (the next offsets to read, as the broker keeps them) with each partition
    that has none (None, or 0, which faust takes for none) at its ``earliest`` offset, the
    first one its consumer reads; None where that is not known either."""
    return {tp: offset if offset else earliest.get(tp) for tp, offset in committed.items()}


def read_before(committed: Mapping[Any, int | None]) -> dict[Any, int | None]:
    """The last offset read, per partition, once the consumer sought to ``committed`` (the
    next offsets to read): the one before it (-1 before offset 0). faust takes the
    committed offset itself as read, so a record the broker never returns there (a
    transaction marker) would be neither read nor skipped, and no commit could pass it."""
    return {tp: offset - 1 if offset is not None else None for tp, offset in committed.items()}


def gap_to_add(read: int | None, offset: int) -> tuple[int, int] | None:
    """The offsets (first, last, inclusive) the fetch skipped between the last record read
    and ``offset``, the one read now; None when it skipped none."""
    if read is None or offset - read <= 1:
        return None
    return read + 1, offset - 1


def add_gap(gap: Any, committed: int | None, first: int, last: int) -> None:
    """Record ``first`` to ``last`` (inclusive) as skipped in ``gap`` (faust's interval tree),
    from the committed offset on (what lies before it is committed already)."""
    if committed is not None:
        first = max(first, committed)
    if first <= last:
        gap.addi(first, last + 1)  # intervals exclude their end
        gap.merge_overlaps()


def new_offset(
    acked: list[int], acked_index: set[int], gap: Any, committed: int | None
) -> int | None:
    """The offset to commit for a partition (None: nothing new), consuming what it covers
    from ``acked`` and ``acked_index``; ``gap`` is faust's interval tree of skipped offsets,
    ``committed`` the next offset to read as last committed (None: not known)."""
    if not acked:
        return None
    highest = max(acked)
    if gap:
        skipped = sorted(gap.overlap(0, highest), key=lambda interval: interval.begin)
        if skipped:
            filled = [o for interval in skipped for o in range(interval.begin, interval.end)]
            acked.extend(filled)
            gap.chop(0, max(filled[-1], highest + 1))
    acked.sort()
    if committed is not None and acked[0] > committed:
        return None  # the record at the committed offset is not done yet
    run = next(consecutive_numbers(acked))
    del acked[: len(run)]
    acked_index.difference_update(run)
    return run[-1] + 1
