"""Replay and skip: decide which selected records to publish (pure), then publish them.

Neither is harmful twice: a replayed event carries its original bytes and
eventId, so a consumer that applied it already sees a duplicate; a skip of
an event its consumer took already is a duplicate too. The plan still leaves
alone what needs no action, so that an operator's "replay all" does only
what is needed:

- ``resolved`` / ``skipped`` rows (settled) and ``retrying`` rows (a replay is
  already on its way) unless ``--force``;
- older DLT copies of a record that died again after a replay: only the
  newest copy is published (it carries the right replay count);
- for ``skip``, poison records unless the operator names the consumers to skip
  them for (``--for-consumer``): poison is no consumer's. A poison record whose
  envelope could be read (eventId, aggregate, version) blocks its aggregate for
  every consumer; skipping it for a consumer lets that consumer take its version
  (its payload is never validated then). Poison whose envelope cannot be read but
  whose headers name its aggregate and version (an eventId that is no id) blocks it
  too: its skip for a consumer publishes a skip record of that version
  (``dlq.skip_record``, as ``release`` does). Poison that names no version holds
  back no aggregate: its skip publishes nothing and marks its row ``skipped`` with the
  operator's decision (``settle``), so that it leaves the dead rows an operator still
  has to decide on.

The poison's own row (consumer ``''``) goes ``skip-requested`` when its skip is
published and ``skipped`` once a consumer named took it (the worker settles it,
and retention deletes it in time). ``skipped`` there says a skip was taken, not
by whom: a later skip for other consumers is published all the same, and records
its decision on the row, which stays ``skipped`` (a consumer that took it
already sees a duplicate).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from app.outbox.broker import denial
from dlq.dead import SETTLED, FailureKey, FailureState, FailureStatus
from dlq.records import OutRecord, replay_record
from dlq.selection import Entry, split_copies
from dlq.skip_record import Aggregate, Release, skip_record

IN_FLIGHT = frozenset({FailureStatus.RETRYING})


class Action(StrEnum):
    """What an operator does with a dead record, and the status it leaves behind."""

    REPLAY = "replay"
    SKIP = "skip"

    @property
    def status(self) -> FailureStatus:
        """The ``failed_event.status`` written when the record is published."""
        return FailureStatus.REPLAYED if self is Action.REPLAY else FailureStatus.SKIP_REQUESTED

    @property
    def past(self) -> str:
        """``replayed`` / ``skipped``, for messages."""
        return "replayed" if self is Action.REPLAY else "skipped"


@dataclass(frozen=True, slots=True)
class Plan:
    """The selected records, sorted into what is published and what is left alone, and why."""

    act: list[Entry]
    left_alone: list[Entry]
    older_copies: list[Entry]
    refused: list[Entry]
    settle: list[Entry] = field(default_factory=list)  # skipped poison: nothing to publish

    @property
    def selected(self) -> int:
        """How many records the selection matched."""
        return sum(
            map(len, (self.act, self.left_alone, self.older_copies, self.refused, self.settle))
        )


def plan(
    entries: Sequence[Entry],
    action: Action,
    force: bool = False,
    for_consumers: Sequence[str] = (),
) -> Plan:
    """Which of ``entries`` to publish: newest copy per failure, in original-topic order;
    poison once for each of ``for_consumers`` (a replay of poison without them: for every
    consumer at once)."""
    newest, older = split_copies(entries)
    act: list[Entry] = []
    left: list[Entry] = []
    refused: list[Entry] = []
    settle: list[Entry] = []
    for entry in newest:
        poison = entry.dead.is_poison
        skips_poison = action is Action.SKIP and poison
        if skips_poison and not entry.dead.has_envelope and not entry.dead.holds_a_version:
            settled = entry.status in SETTLED and not force
            (left if settled else settle).append(entry)
        elif skips_poison and not for_consumers:
            refused.append(entry)
        # A skip of poison is for the consumers named, of whom its row's status says nothing.
        elif not force and entry.status in SETTLED | IN_FLIGHT and not skips_poison:
            left.append(entry)
        elif poison and for_consumers:
            act += [replace(entry, target=consumer) for consumer in for_consumers]
        else:
            act.append(entry)
    act.sort(key=_original_order)
    return Plan(act, left, older, refused, sorted(settle, key=_original_order))


def _original_order(entry: Entry) -> tuple[str, int, int, str]:
    dead = entry.dead
    return (
        dead.original_topic,
        dead.original_partition if dead.original_partition is not None else -1,
        dead.original_offset if dead.original_offset is not None else -1,
        entry.consumer or "",
    )


class Sender(Protocol):
    """Publishes one record and returns its (partition, offset) once acknowledged."""

    async def send(self, record: OutRecord, partition: int | None) -> tuple[int, int]:
        """Send ``record``."""
        ...


class Decisions(Protocol):
    """Records an operator's decision on a ``failed_event`` row (see ``dlq.status``)."""

    async def decide(
        self, key: FailureKey, seen: FailureState, status: str, by: str, note: str | None
    ) -> bool:
        """Compare-and-set the row's status and decision."""
        ...

    async def undo(self, key: FailureKey, seen: FailureState, status: str) -> bool:
        """Put ``seen`` back."""
        ...

    async def forget(self, outbox_id: int) -> None:
        """Delete the ``DEAD`` outbox row of an unpublished record (the replay or skip just
        published took its place)."""
        ...


@dataclass
class Summary:
    """What ``--execute`` did."""

    done: list[tuple[Entry, tuple[int, int]]] = field(default_factory=list)
    errors: list[tuple[Entry, str]] = field(default_factory=list)


Report = Callable[[Entry, tuple[int, int] | None, str | None], None]


@dataclass
class Executor:
    """Publishes a plan's records, at most ``rate`` per second, deciding each one first."""

    action: Action
    sender: Sender
    decisions: Decisions
    by: str
    note: str | None = None
    rate: float | None = None
    # The deployment whose consumers its records are for; None: each record's own.
    app_id: str | None = None
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _decided: set[FailureKey] = field(default_factory=set, init=False, repr=False)

    async def run(self, entries: Sequence[Entry], report: Report) -> Summary:
        """Decide and publish each of ``entries`` in order; ``report`` hears of each one."""
        summary = Summary()
        start = self.clock()
        for index, entry in enumerate(entries):
            if self.rate:
                wait = start + index / self.rate - self.clock()
                if wait > 0:
                    await self.sleep(wait)
            try:
                sent = await self._one(entry)
            except _NotDone as exc:
                summary.errors.append((entry, str(exc)))
                report(entry, None, str(exc))
            else:
                summary.done.append((entry, sent))
                report(entry, sent, None)
        return summary

    async def _one(self, entry: Entry) -> tuple[int, int]:
        dead = entry.dead
        status: str = self.action.status
        # No row: published all the same, the DLT is the truth. A settled row (forced) keeps
        # its status and decision: its consumer took the event, the replay is a duplicate.
        # Poison's row skipped already (a consumer took a skip of it) keeps its status and
        # records this skip's decision: the skip of another consumer does not reopen it.
        seen = entry.state.status
        if self.action is Action.SKIP and dead.is_poison and seen == FailureStatus.SKIPPED:
            status = seen
        if self._gives_up(entry):  # no worker settles a skip record's poison: settled here
            status = FailureStatus.SKIPPED
        unchanged = seen == FailureStatus.UNKNOWN or (seen in SETTLED and status != seen)
        key = None if unchanged else dead.failure_key
        if key in self._decided:
            key = None  # a skip of poison for several consumers decides its one row once
        if key is not None and not await self.decisions.decide(
            key, entry.state, status, self.by, self.note
        ):
            raise _NotDone(f"its status changed from {seen} meanwhile; list it again")
        out = self._record(entry)
        try:
            sent = await self.sender.send(out, dead.original_partition)
        except Exception as exc:  # this record failed; the run goes on with the next
            if key is not None:
                await self.decisions.undo(key, entry.state, status)
            said = denial(exc, out.topic) or repr(exc)
            raise _NotDone(f"publishing to {out.topic} failed: {said}") from exc
        if key is not None:
            self._decided.add(key)
        if dead.unpublished is not None:
            await self.decisions.forget(dead.unpublished.outbox_id)
        return sent

    def _record(self, entry: Entry) -> OutRecord:
        """What goes out: the record's own bytes (a replay, or a skip its consumer reads
        from them); a skip record of its version for poison whose envelope cannot be read
        but whose headers name its aggregate and version (``dlq.skip_record``)."""
        dead, app_id = entry.dead, self.app_id or entry.dead.app_id
        if self._gives_up(entry) and entry.consumer and dead.aggregate_version is not None:
            where = Aggregate(
                entry.consumer,
                dead.aggregate_type or "",
                dead.aggregate_id or "",
                dead.original_topic,
                dead.original_partition or 0,
                dead.record.key,
            )
            version, release = dead.aggregate_version, Release(self.by, self.note)
            return skip_record(where, version, self.now(), release, app_id)
        return replay_record(dead.record, self.action is Action.SKIP, entry.consumer, app_id)

    def _gives_up(self, entry: Entry) -> bool:
        """A skip of poison its consumer cannot read, that holds a version back."""
        return self.action is Action.SKIP and entry.dead.skipped_by_version


async def settle(
    entries: Sequence[Entry], decisions: Decisions, by: str, note: str | None, report: Report
) -> Summary:
    """Mark the row of each of ``entries`` (poison without a readable envelope) ``skipped``
    with the operator's decision; nothing is published. ``report`` hears of each one."""
    summary = Summary()
    for entry in entries:
        key = entry.dead.failure_key
        if entry.state.status == FailureStatus.UNKNOWN or key is None:
            error = "the database has no row of it to mark (another database's record?)"
        elif await decisions.decide(key, entry.state, FailureStatus.SKIPPED, by, note):
            summary.done.append((entry, (-1, -1)))
            report(entry, None, None)
            continue
        else:
            error = f"its status changed from {entry.state.status} meanwhile; list it again"
        summary.errors.append((entry, error))
        report(entry, None, error)
    return summary


class _NotDone(Exception):
    """One record could not be acted on; the others go on."""
