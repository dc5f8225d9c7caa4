"""Which dead-letter records a command acts on: pure filters over records and their status.

The header filters run before the database is asked anything; the status
filter and the limit after, because they need the ``failed_event`` rows.
Records come out oldest failure first (then DLT partition and offset), so
``--limit N`` takes the N oldest: a backlog is worked through in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dlq.dead import (
    AWAITING,
    NO_ROW,
    UNPUBLISHED_PARTITION,
    DeadLetter,
    FailureKey,
    FailureState,
    FailureStatus,
    position_text,
)

_AGO = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_EPOCH = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Selection:
    """The filters of ``list``, ``replay`` and ``skip``; unset ones let everything through."""

    positions: frozenset[tuple[int, int]] = frozenset()
    event_id: str | None = None
    consumer: str | None = None
    reason: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    statuses: frozenset[str] = frozenset()
    limit: int | None = None

    @property
    def narrows(self) -> bool:
        """True when some filter is set (``--execute`` on the whole DLT needs ``--all``)."""
        return bool(
            self.positions
            or self.event_id
            or self.consumer
            or self.reason
            or self.since
            or self.until
            or self.statuses
            or self.limit
        )

    def describe(self) -> str:
        """The filters as ``name=value`` pairs, for "nothing matched" messages."""
        parts = [f"position={position_text(p, o)}" for p, o in sorted(self.positions)]
        named = {
            "event-id": self.event_id,
            "consumer": self.consumer,
            "reason": self.reason,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "status": ",".join(sorted(self.statuses)) or None,
        }
        parts += [f"{name}={value}" for name, value in named.items() if value is not None]
        return ", ".join(parts) or "no filter"

    def matches(self, dead: DeadLetter) -> bool:
        """Whether ``dead`` passes the header filters (all but status and limit)."""
        record = dead.record
        if self.positions and (record.partition, record.offset) not in self.positions:
            return False
        if self.event_id is not None and dead.event_id != self.event_id:
            return False
        if self.consumer is not None and dead.consumer != self.consumer:
            return False
        if self.reason is not None and dead.reason != self.reason:
            return False
        if self.since is None and self.until is None:
            return True
        moment = dead.last_failure_at
        if moment is None:
            return False
        return (self.since is None or moment >= self.since) and (
            self.until is None or moment <= self.until
        )


@dataclass(frozen=True, slots=True)
class Entry:
    """A selected dead-letter record with what the database says about it; ``target``: the
    consumer a skip of poison is for (poison is no consumer's until an operator names one)."""

    dead: DeadLetter
    state: FailureState
    target: str | None = None
    waiting: tuple[str, ...] = ()  # poison skipped for some: the consumers it still holds

    @property
    def status(self) -> str:
        """``failed_event.status``, or ``unknown`` when the database has no row; ``unpublished``
        for a record no topic took, until someone decides on it; ``dead`` for poison a skip
        settled for some consumers while others still wait for its version."""
        if self.dead.unpublished is not None and self.state.status in AWAITING:
            return FailureStatus.UNPUBLISHED
        if self.waiting and self.state.status == FailureStatus.SKIPPED:
            return FailureStatus.DEAD
        return self.state.status

    @property
    def consumer(self) -> str | None:
        """The consumer a replay or skip of this record is for."""
        return self.target or self.dead.consumer


def prefilter(records: Iterable[DeadLetter], selection: Selection) -> list[DeadLetter]:
    """The records that pass the header filters, oldest failure first."""
    return sorted(filter(selection.matches, records), key=_age)


def finish(
    records: Iterable[DeadLetter],
    states: Mapping[FailureKey, FailureState],
    selection: Selection,
    waiting: Mapping[FailureKey, tuple[str, ...]] | None = None,
) -> list[Entry]:
    """Join each record with its ``failed_event`` state (and, for poison skipped for some,
    the consumers still ``waiting`` for it); apply the status filter and the limit."""
    waits = waiting or {}
    entries = [
        Entry(dead, _state(dead, states), waiting=waits.get(dead.failure_key or _NO_KEY, ()))
        for dead in records
    ]
    if selection.statuses:
        entries = [entry for entry in entries if entry.status in selection.statuses]
    return entries if selection.limit is None else entries[: selection.limit]


def split_copies(entries: Iterable[Entry]) -> tuple[list[Entry], list[Entry]]:
    """(the newest DLT copy of each failure, the older copies), each in the order given.

    An event that died again after a replay has several copies in the DLT, all
    naming one ``failed_event`` row; the newest carries the right replay count.
    The entries of one record for different consumers (poison acted on for each
    consumer named) are no copies of each other, nor are two deployments' records of one
    event (services reading one topic, each with a consumer of that name).
    """
    listed = list(entries)
    newest: dict[tuple[FailureKey, str | None, str | None] | int, Entry] = {}
    for entry in listed:
        failure = entry.dead.failure_key
        key = (failure, entry.target, entry.dead.app_id) if failure is not None else id(entry)
        kept = newest.get(key)
        if kept is None or _recency(entry) > _recency(kept):
            newest[key] = entry
    kept_ids = {id(entry) for entry in newest.values()}
    return (
        [entry for entry in listed if id(entry) in kept_ids],
        [entry for entry in listed if id(entry) not in kept_ids],
    )


def _recency(entry: Entry) -> tuple[int, datetime, int, int]:
    dead = entry.dead
    return (dead.replay_count, *_age(dead))


_NO_KEY: FailureKey = ("", "", -1, -1)


def _state(dead: DeadLetter, states: Mapping[FailureKey, FailureState]) -> FailureState:
    key = dead.failure_key
    return states.get(key, NO_ROW) if key is not None else NO_ROW


def _age(dead: DeadLetter) -> tuple[datetime, int, int]:
    return (dead.last_failure_at or _EPOCH, dead.record.partition, dead.record.offset)


def parse_position(text: str) -> tuple[int, int]:
    """``"3:17"`` → ``(3, 17)``: a record's DLT partition and offset; ``"outbox:12"`` →
    ``(UNPUBLISHED_PARTITION, 12)``: a record the relay gave up on, by its outbox row."""
    partition, sep, offset = text.partition(":")
    if sep and partition == "outbox" and offset.isdigit():
        return UNPUBLISHED_PARTITION, int(offset)
    if not sep or not partition.isdigit() or not offset.isdigit():
        raise ValueError(
            f"expected <dlt-partition>:<dlt-offset> such as 0:42 (or outbox:<id>), got {text!r}"
        )
    return int(partition), int(offset)


def parse_moment(text: str, now: datetime) -> datetime:
    """An ISO-8601 time (naive means UTC), or an age before ``now``: ``90s``, ``2h``, ``1d``."""
    ago = _AGO.match(text.strip())
    if ago:
        try:
            return now - timedelta(seconds=int(ago.group(1)) * _UNIT_SECONDS[ago.group(2)])
        except OverflowError:  # before year 1, or beyond what a timedelta holds
            raise ValueError(
                f"{text.strip()!r} reaches back before the calendar's first year"
            ) from None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"expected an ISO-8601 time (2024-05-01T10:00:00Z) or an age (30m, 2h, 1d), "
            f"got {text!r}"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
