"""A partition's commit never passes a record that was not processed.

Contract (``app.runtime.offsets``, used by the worker's faust consumer): the committed
offset is the next one to read; nothing is committed while the record at it is neither
acknowledged nor skipped by the fetch (also when that offset is 0); offsets the fetch
skipped between two records read count as done, but the record read after them does
not until it is acknowledged; a run of acknowledged offsets is committed up to its end.
faust's own checks commit past the record at the committed offset in the first case and
count the record read after a skip as done in the second.
"""

from __future__ import annotations

import pytest
from intervaltree import IntervalTree

from app.runtime.offsets import add_gap, gap_to_add, new_offset, read_before, with_floor


def commit(acked: list[int], committed: int | None, gap: IntervalTree | None = None) -> int | None:
    tree = gap if gap is not None else IntervalTree()
    return new_offset(list(acked), set(acked), tree, committed)


@pytest.mark.parametrize(
    ("acked", "committed", "expected"),
    [
        ([101, 102], 100, None),  # record 100 not processed: faust commits 103
        ([1, 2], 0, None),  # the same at offset 0, which faust does not check
        ([100, 101, 103], 100, 102),
        ([100, 101, 102], 100, 103),
        ([7, 8], None, 9),  # nothing committed yet: nothing to compare with
        ([], 100, None),
    ],
)
def test_a_run_is_committed_only_from_the_committed_offset(
    acked: list[int], committed: int | None, expected: int | None
) -> None:
    assert commit(acked, committed) == expected


def test_the_record_read_after_a_skip_waits_for_its_acknowledgement() -> None:
    assert gap_to_add(99, 100) is None
    assert gap_to_add(None, 150) is None
    first, last = gap_to_add(99, 150) or (0, 0)
    assert (first, last) == (100, 149)

    gap = IntervalTree()
    add_gap(gap, 100, first, last)
    assert commit([], 100, gap) is None
    assert commit([149], 100, gap) == 150  # 150 itself is not done
    gap = IntervalTree()
    add_gap(gap, 100, first, last)
    assert commit([150], 100, gap) == 151


def test_a_gap_starts_at_the_committed_offset_at_the_earliest() -> None:
    gap = IntervalTree()
    add_gap(gap, 100, 98, 101)
    assert sorted((i.begin, i.end) for i in gap) == [(100, 102)]
    assert commit([102], 100, gap) == 103


def test_after_a_seek_a_record_missing_at_the_committed_offset_is_a_gap() -> None:
    # A transaction marker at 100: the first record the broker returns is 101.
    read = read_before({"tp": 100, "start": 0, "none": None})
    assert read == {"tp": 99, "start": -1, "none": None}
    gap = IntervalTree()
    skipped = gap_to_add(read["tp"], 101)
    assert skipped == (100, 100)
    add_gap(gap, 100, *skipped)
    assert commit([101], 100, gap) == 102


def test_a_partition_with_nothing_committed_starts_at_its_earliest_offset() -> None:
    committed = {"fresh": None, "zero": 0, "done": 40, "unknown": None}
    floor = with_floor(committed, {"fresh": 12, "zero": 0})
    assert floor == {"fresh": 12, "zero": 0, "done": 40, "unknown": None}
    # Records 12 to 14 read and acknowledged after 15 and 16: nothing passes 12 until it is.
    assert commit([15, 16], floor["fresh"]) is None
    assert commit([12, 13, 14, 15, 16], floor["fresh"]) == 17
    assert commit([15, 16], committed["fresh"]) == 17  # without a floor: 12 to 14 skipped
    # The first record at the earliest offset 0 is read after "-1": no gap before it.
    read = read_before(floor)
    assert gap_to_add(read["zero"], 0) is None
    assert gap_to_add(read["zero"], 3) == (0, 2)  # what the broker never returned at 0 to 2
