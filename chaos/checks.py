"""The soak's final checks that need no service: pure functions over what was read back.

- every poison record on the order topic is on the DLT exactly once, and nothing
  else is (a DLT record names its original record in ``dlt-original-*`` headers);
  a record there twice is told apart by the outbox: written twice (recorded again)
  or written once and published twice (a relay that lost its lease after publishing);
- every good event took effect exactly once (the ``chaos-tally`` counters);
- how many records the topic holds, and how many of them repeat an event.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from app.records import RawRecord
from dlq import headers

EXAMPLES = 5  # ids or positions quoted per problem


@dataclass(frozen=True)
class DeadLetterCheck:
    """Poison on the order topic against the DLT."""

    poison: int  # poison records on the order topic
    once: int  # of those, on the DLT exactly once
    missing: list[str] = field(default_factory=list)  # positions never dead-lettered
    repeated: dict[str, int] = field(default_factory=dict)  # position -> copies on the DLT
    others: list[str] = field(default_factory=list)  # DLT records of good events: "pos (reason)"
    written_twice: list[str] = field(default_factory=list)  # repeated: more than one outbox row
    # repeated: where each copy is on the DLT, when it was written, and whether the copies
    # are the same record byte for byte (what a relay's search for a dead relay's record
    # compares): "[partition]@offset t=timestamp_ms", then "identical" or "differ"
    copies_at: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Each poison record once, nothing else."""
        return not self.missing and not self.repeated and not self.others


def check_dead_letters(
    topic: Iterable[RawRecord],
    dlt: Iterable[RawRecord],
    poison: Collection[bytes],
    written: Mapping[str, int] | None = None,
) -> DeadLetterCheck:
    """Match the DLT's records to the order topic's by original position; ``written``
    (position -> outbox rows written for it) tells why a record is there twice."""
    poison_at = {r.position: r for r in topic if r.value in poison}
    copies: Counter[str] = Counter()
    found: dict[str, list[RawRecord]] = {}
    others = []
    for record in dlt:
        origin = _origin(record)
        if origin in poison_at:
            copies[origin] += 1
            found.setdefault(origin, []).append(record)
        else:
            reason = (record.header(headers.DLT_REASON) or b"?").decode(errors="replace")
            others.append(f"{origin} ({reason})")
    return DeadLetterCheck(
        poison=len(poison_at),
        once=sum(1 for position in poison_at if copies[position] == 1),
        missing=[position for position in poison_at if copies[position] == 0],
        repeated={position: n for position, n in copies.items() if n > 1},
        others=others,
        written_twice=[
            position
            for position, n in copies.items()
            if n > 1 and (written or {}).get(position, 0) > 1
        ],
        copies_at={position: _where(found[position]) for position, n in copies.items() if n > 1},
    )


def _where(records: list[RawRecord]) -> list[str]:
    """Each copy's place and time on the DLT, then whether the copies are identical."""
    places = [f"[{r.partition}]@{r.offset} t={r.timestamp_ms}" for r in records]
    same = len({(r.key, r.value, r.headers) for r in records}) == 1
    return [*places, "identical" if same else "differ"]


def _origin(record: RawRecord) -> str:
    """``topic[partition]@offset`` of the record a DLT record came from."""
    parts = (
        record.header(name) or b"?"
        for name in (
            headers.DLT_ORIGINAL_TOPIC,
            headers.DLT_ORIGINAL_PARTITION,
            headers.DLT_ORIGINAL_OFFSET,
        )
    )
    topic, partition, offset = (part.decode(errors="replace") for part in parts)
    return f"{topic}[{partition}]@{offset}"


@dataclass(frozen=True)
class TallyCheck:
    """How many times each good event took effect."""

    events: int  # good events
    once: int
    repeated: dict[str, int] = field(default_factory=dict)  # event id -> times (> 1)
    missing: int = 0
    strangers: int = 0  # rows of events that are not good events

    @property
    def ok(self) -> bool:
        """Every good event exactly once, nothing else."""
        return self.once == self.events and not self.repeated and not self.strangers


def check_tally(tallies: Mapping[str, int], good: Collection[str]) -> TallyCheck:
    """``tallies`` (event id -> effects) against the ``good`` event ids."""
    return TallyCheck(
        events=len(good),
        once=sum(1 for event_id in good if tallies.get(event_id) == 1),
        repeated={event_id: n for event_id, n in tallies.items() if n > 1},
        missing=sum(1 for event_id in good if event_id not in tallies),
        strangers=sum(1 for event_id in tallies if event_id not in good),
    )


@dataclass(frozen=True)
class TopicCount:
    """The order topic as the consumers saw it."""

    records: int
    events: int  # distinct good event ids
    repeats: int  # good records whose event id came before: duplicates to absorb
    poison: int


def count_topic(topic: Iterable[RawRecord], poison: Collection[bytes]) -> TopicCount:
    """Records, distinct events and repeats on the order topic."""
    records = poison_seen = 0
    ids: Counter[str] = Counter()
    for record in topic:
        records += 1
        if record.value in poison:
            poison_seen += 1
            continue
        ids[str(json.loads(record.value or b"{}")["eventId"])] += 1
    return TopicCount(records, len(ids), sum(ids.values()) - len(ids), poison_seen)


def examples(items: Iterable[str]) -> str:
    """The first few of ``items``, for a message."""
    shown = list(items)
    more = f" and {len(shown) - EXAMPLES} more" if len(shown) > EXAMPLES else ""
    return ", ".join(shown[:EXAMPLES]) + more
