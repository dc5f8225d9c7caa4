"""Decode stage: raw bytes to a typed event, or to a poison verdict. Pure, no I/O.

The edge of the pipeline: what producers write (numeric ids, the aggregate in the
key, Debezium's wrappings, see ``wire``) becomes the one envelope shape here, and
nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from datetime import UTC, datetime
from functools import cache
from typing import Any, NamedTuple

from pydantic import ValidationError
from pydantic_core import SchemaValidator, core_schema

from app.db.tables import AGG_ID, AGG_TYPE, EVENT_ID, EVENT_TYPE, INTEGER_MAX
from app.errors import (
    InvalidHeaderError,
    InvalidSchemaError,
    PoisonError,
    UnsupportedVersionError,
)
from app.pipeline.outcomes import Kind, Outcome
from app.pipeline.wire import (
    AGGREGATE,
    LOOKED_ELSEWHERE,
    envelope_object,
    readable_fields,
    with_aggregate,
)
from app.records import RawRecord
from app.settings import DEFAULT_AGGREGATE_TYPE
from dlq.trip import Trip
from schemas.envelope import Envelope, Event, RawEnvelope
from schemas.ids import ID_TYPE_ERROR, NO_CONTROL_CHARACTERS, id_text
from schemas.registry import is_known_event_type, model_count, model_for, registered_models

EventOf = tuple[str, str, int | None]
"""Which event an eventId stands for: its aggregate type and id, and its version."""


class Decoded(NamedTuple):
    """A record that is a valid event. ``known`` is False for an eventType no schema knows:
    such an event carries no work but still advances every consumer's version."""

    record: RawRecord
    event: Event
    known: bool
    trip: Trip
    # The event's ``eventId``, read on every step of every consumer: a field, not a property.
    event_id: str

    @classmethod
    def of(cls, record: RawRecord, event: Event, known: bool, trip: Trip) -> Decoded:
        """The decoded ``record``: ``event`` with its ``eventId`` at hand."""
        return cls(record, event, known, trip, event.event_id)

    @property
    def event_of(self) -> EventOf:
        """Which event this is: what its eventId's dedup record and parked row are of."""
        event = self.event
        return (event.aggregate_type, event.aggregate_id, event.aggregate_version)


class Read(NamedTuple):
    """A record whose value is a JSON object, not yet validated: enough for the prefilter."""

    record: RawRecord
    raw: dict[str, Any]
    trip: Trip

    @property
    def event_id(self) -> str | None:
        """The ``eventId`` as text (an integer in decimal) if it is a non-empty id."""
        return id_text(self.raw.get("eventId")) or None

    @property
    def event_type(self) -> str | None:
        """The ``eventType`` if it is a string."""
        value = self.raw.get("eventType")
        return value if isinstance(value, str) else None

    @property
    def event_of(self) -> EventOf | None:
        """``Decoded.event_of`` of this record once validated, read before that: ``None``
        where a field is not as validation keeps it (then only validation can say)."""
        raw = self.raw
        aggregate_type = raw.get("aggregateType")
        aggregate_id = id_text(raw.get("aggregateId"))
        if type(aggregate_type) is not str or aggregate_id is None:
            return None
        version = raw.get("aggregateVersion", raw.get("aggregate_version"))
        if version is None:
            return (aggregate_type, aggregate_id, None)
        version = _version(version)
        return None if version is None else (aggregate_type, aggregate_id, version)


class Named(NamedTuple):
    """What a JSON object whose envelope failed says of itself, where a column can hold it:
    its ``eventId``, ``eventType``, aggregate and ``aggregateVersion`` (each ``None`` if
    absent, not an id, a string or a version, too long, or holding a control character;
    the aggregate as ``read`` completed it from the key and headers), so that its failure
    row, DLT headers, ``trace`` and logs name it. With an event id and an aggregate, an
    operator's skip of it takes that version for a consumer (``skipped``)."""

    event_id: str | None
    event_type: str | None
    aggregate_type: str | None = None
    aggregate_id: str | None = None
    aggregate_version: int | None = None

    def skipped(self, trip: Trip) -> Event | None:
        """The envelope a skip of this poison stands for, for the consumer it names: the
        event id, aggregate and version, nothing a handler reads (none runs); ``None``
        when those are not all readable."""
        if not (self.event_id and self.aggregate_type and self.aggregate_id):
            return None
        return Event.model_construct(
            event_id=self.event_id,
            event_type=self.event_type or "",
            event_version=1,
            aggregate_type=self.aggregate_type,
            aggregate_id=self.aggregate_id,
            aggregate_version=self.aggregate_version,
            occurred_at=trip.first_failure_at or datetime.now(UTC),
            data={},
        )


class Poison(NamedTuple):
    """A record that cannot become an event, and why. ``envelope`` is set when it could be
    read; ``event_type`` when the JSON object named one (a string), even if its envelope
    failed: what metrics and logs count the poison under; ``named``: what a JSON object
    whose envelope failed says of itself (``Named``)."""

    record: RawRecord
    error: PoisonError
    trip: Trip
    envelope: RawEnvelope | None = None
    event_type: str | None = None
    named: Named | None = None

    @property
    def described(self) -> RawEnvelope | Named | None:
        """The envelope, or what could be read of it: what its failure row and DLT headers
        say of the event."""
        return self.envelope if self.envelope is not None else self.named

    def outcome(self, kind: Kind, consumer: str, detail: str, error: str) -> Outcome:
        """What became of it (``kind``) for ``consumer``, named by its eventId if it could be
        read and by where it was read."""
        record, described = self.record, self.described
        return Outcome(
            kind,
            consumer,
            described.event_id if described else None,
            self.event_type,
            detail,
            error,
            record.topic,
            record.partition,
            record.offset,
        )


def decode(
    record: RawRecord,
    payloads: Container[str] | None = None,
    default_aggregate_type: str = DEFAULT_AGGREGATE_TYPE,
) -> Decoded | Poison:
    """Turn one record into a typed event; never raises for bad input. ``payloads``: see
    ``validate``; ``default_aggregate_type``: see ``read``."""
    found = _decode_json(record, payloads, default_aggregate_type)
    if found is not None:
        return found
    item = read(record, default_aggregate_type)
    return validate(item, payloads) if isinstance(item, Read) else item


def _decode_json(
    record: RawRecord,
    payloads: Container[str] | None,
    default_aggregate_type: str = DEFAULT_AGGREGATE_TYPE,
) -> Decoded | None:
    """The common case of ``decode`` in one pass, from the bytes straight to the typed event
    (no intermediate dict: about 60% of the cost of parsing and then validating);
    ``None`` for anything else, which ``read`` and ``validate`` then handle and explain.

    The common case is a value that is the envelope as a JSON object (ids as strings
    or integers), its aggregate in it or in the key: a value that names neither
    spelling of ``aggregateId`` (or of ``aggregateType``) gets it written in front
    from the record, from where ``read`` would take it (``wire.SOURCES``,
    ``wire.with_aggregate``; a few byte searches, about 3% of a record's decode, where
    a failed first attempt cost more than the whole decode). A wrapped value, or one
    that leaves its event id or type to a header, is read by ``read``.

    One validator (``_fast_validator``) picks the typed envelope by the object's own
    top-level ``eventType`` and ``eventVersion`` as it parses (pydantic's tagged union:
    no search of the bytes first) and takes ``Event`` for a type whose payload this
    worker does not read. An event whose type it should have typed and did not (its
    payload failed, or its version has no model) is left to ``validate``, which says why.
    """
    value = record.value
    # Not an object (a JSON string holding one), or a schema-wrapped one: ``read`` unwraps.
    if not value or value[0] != _OPEN_BRACE or value.startswith(_SCHEMA_WRAPPED):
        return None
    # Keyed by its aggregate: written in from the record, as ``read`` takes it (``wire``).
    missing = [source for source in AGGREGATE if not source.named_in(value)]
    if missing:
        completed = with_aggregate(record, missing, default_aggregate_type)
        if completed is None:
            return None
        value = completed
    validator, typed = _fast_validator(payloads)
    try:
        event = validator.validate_json(value)
    except ValidationError:
        return None
    expected = typed.get(type(event))
    if expected is None:  # an untyped envelope: right only for a type this worker skips
        event_type = event.event_type
        if payloads is None or event_type in payloads:
            return None
        known = is_known_event_type(event_type)
    elif expected != (event.event_type, event.event_version):
        return None  # a second spelling of a field disagreed with the one the union read
    else:
        known = True
    try:
        trip = Trip.of(record)
    except InvalidHeaderError:
        return None
    return Decoded.of(record, event, known, trip)


_Typed = dict[type, tuple[str, int]]
_FAST: dict[tuple[frozenset[str] | None, int], tuple[SchemaValidator, _Typed]] = {}


def _fast_validator(payloads: Container[str] | None) -> tuple[SchemaValidator, _Typed]:
    """The one-pass validator for ``payloads`` (``None``: every type with a model), and
    the ``(eventType, eventVersion)`` each typed envelope class it returns stands for.

    A tagged union on ``eventType``, then on ``eventVersion``, of the typed envelopes of
    those types; anything it does not match (another type, a version with no model, a
    payload that fails) is tried as ``Event``. Kept per set of payloads (a ``frozenset``,
    as the registry gives it; a set is copied into one) and number of registered models
    (only ever added)."""
    if payloads is not None and not isinstance(payloads, frozenset):
        if not isinstance(payloads, set | list | tuple):
            return _built(payloads)  # a container of another kind: not kept
        payloads = frozenset(payloads)
    key = (payloads, model_count())
    found = _FAST.get(key)
    if found is None:
        found = _FAST[key] = _built(payloads)
    return found


def _built(payloads: Container[str] | None) -> tuple[SchemaValidator, _Typed]:
    """``_fast_validator``'s validator and classes, built."""
    by_type: dict[str, dict[Any, Any]] = {}
    typed: _Typed = {}
    for (event_type, version), model in registered_models().items():
        if payloads is not None and event_type not in payloads:
            continue
        envelope = _envelope_of(model)
        by_type.setdefault(event_type, {})[version] = envelope.__pydantic_core_schema__
        typed[envelope] = (event_type, version)
    choices: list[Any] = [Event.__pydantic_core_schema__]
    if by_type:
        by_version: dict[Any, Any] = {
            event_type: core_schema.tagged_union_schema(versions, discriminator="eventVersion")
            for event_type, versions in by_type.items()
        }
        choices.insert(0, core_schema.tagged_union_schema(by_version, discriminator="eventType"))
    schema = core_schema.union_schema(choices, mode="left_to_right")
    return SchemaValidator(schema), typed


_OPEN_BRACE = ord("{")
_SCHEMA_WRAPPED = b'{"schema"'


def read(record: RawRecord, default_aggregate_type: str = DEFAULT_AGGREGATE_TYPE) -> Read | Poison:
    """The first half of ``decode``: the envelope as a JSON object, or poison.

    The value may be wrapped; fields it lacks come from the key and headers, and
    ``aggregateType`` at last from ``default_aggregate_type`` (see ``wire``).
    """
    try:
        trip = Trip.of(record)
    except InvalidHeaderError as exc:
        return _unread(record, exc, Trip.fresh(record), default_aggregate_type)
    try:
        raw = envelope_object(record, default_aggregate_type)
    except PoisonError as exc:
        if trip.skip and trip.consumer is not None:
            # An operator's skip of it for that consumer: what can be read of it is enough
            # (``validate`` takes its version, or says why it cannot).
            return Read(record, readable_fields(record, default_aggregate_type), trip)
        return _unread(record, exc, trip, default_aggregate_type)
    return Read(record, raw, trip)


def _unread(
    record: RawRecord, error: PoisonError, trip: Trip, default_aggregate_type: str
) -> Poison:
    """Poison found before its envelope was read (a header, the value's JSON, a key that is
    no text), named by what can be read of it all the same (``Named``): its failure row,
    DLT headers and ``trace`` name the event and the aggregate it holds, and an operator's
    skip of it can take that version."""
    named = _named(readable_fields(record, default_aggregate_type))
    names = named.event_id or named.aggregate_id  # the default aggregate type says nothing
    return Poison(record, error, trip, None, named.event_type, named if names else None)


def validate(item: Read, payloads: Container[str] | None = None) -> Decoded | Poison:
    """The second half of ``decode``: the JSON object as a typed event, or poison.

    ``payloads``: the eventTypes whose payload to validate against its model (``None``:
    all). An event of any other type is one no handler here reads: its envelope is
    checked, its ``data`` is left as it came, and it advances versions like any event.
    So is an operator's skip of a record whose payload fails (``dlq skip``).
    """
    record, raw, trip = item.record, item.raw, item.trip
    event_type = item.event_type

    def poison(error: PoisonError, envelope: RawEnvelope | None = None) -> Decoded | Poison:
        named = None if envelope is not None else _named(raw)
        if trip.skip and trip.consumer is not None:
            # An operator skips it for that consumer, which takes its version and runs no
            # handler: the envelope is all that is read (its payload may be what killed
            # it), or what a failed envelope says of itself.
            taken = envelope if named is None else named.skipped(trip)
            if taken is not None:
                return Decoded.of(record, taken, False, trip)
        return Poison(record, error, trip, envelope, event_type, named)

    if payloads is not None and event_type is not None and event_type not in payloads:
        try:
            envelope = Event.model_validate(raw)
        except ValidationError as exc:
            return poison(InvalidSchemaError(f"envelope: {_summary(exc)}"))
        return Decoded.of(record, envelope, is_known_event_type(event_type), trip)
    typed_envelope = _typed_envelope(event_type, raw.get("eventVersion"))
    if typed_envelope is not None:
        # The common case in one validation; on any error the steps below say which part.
        try:
            return Decoded.of(record, typed_envelope.model_validate(raw), True, trip)
        except ValidationError:
            pass
    try:
        envelope = RawEnvelope.model_validate(raw)
    except ValidationError as exc:
        return poison(InvalidSchemaError(f"envelope: {_summary(exc)}"))
    model = model_for(envelope.event_type, envelope.event_version)
    if model is None:
        if is_known_event_type(envelope.event_type):
            return poison(
                UnsupportedVersionError(
                    f"{envelope.event_type} has no model for eventVersion {envelope.event_version}"
                ),
                envelope,
            )
        return Decoded.of(record, envelope, False, trip)
    try:
        data = model.model_validate(envelope.data)
    except ValidationError as exc:
        return poison(InvalidSchemaError(f"data: {_summary(exc)}"), envelope)
    typed = envelope.model_copy(update={"data": data})
    return Decoded.of(record, typed, True, trip)


def _named(raw: dict[str, Any]) -> Named:
    def field(camel: str, snake: str) -> Any:
        return raw.get(camel, raw.get(snake))

    event_type = field("eventType", "event_type")
    aggregate_type = field("aggregateType", "aggregate_type")
    return Named(
        _storable(id_text(field("eventId", "event_id")), EVENT_ID),
        _storable(event_type if isinstance(event_type, str) else None, EVENT_TYPE),
        _storable(aggregate_type if isinstance(aggregate_type, str) else None, AGG_TYPE),
        _storable(id_text(field("aggregateId", "aggregate_id")), AGG_ID),
        _version(field("aggregateVersion", "aggregate_version")),
    )


def _version(value: Any) -> int | None:
    """``value`` as an aggregate version (an integer, or its decimal text, from 1 to the
    column's largest), else ``None``."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if type(value) is int and 1 <= value <= INTEGER_MAX:
        return value
    return None


def _storable(text: str | None, limit: int) -> str | None:
    """``text`` if a column of ``limit`` characters holds it (no control character)."""
    if text and len(text) <= limit and _NO_CONTROL.fullmatch(text):
        return text
    return None


_NO_CONTROL = re.compile(NO_CONTROL_CHARACTERS)


def _typed_envelope(event_type: Any, version: Any) -> type[Event] | None:
    """The envelope model whose ``data`` is the payload model of ``(event_type, version)``."""
    if not isinstance(event_type, str) or type(version) is not int:
        return None
    model = model_for(event_type, version)
    return None if model is None else _envelope_of(model)


@cache
def _envelope_of(model: type[Any]) -> type[Event]:
    return Envelope[model]  # type: ignore[valid-type]


def read_batch(
    records: list[RawRecord], default_aggregate_type: str = DEFAULT_AGGREGATE_TYPE
) -> tuple[list[Read], list[Poison]]:
    """``read`` each record: JSON objects (in arrival order) and poison."""
    return _split((read(record, default_aggregate_type) for record in records), Read)


def decode_batch(
    records: list[RawRecord],
    payloads: Container[str] | None = None,
    default_aggregate_type: str = DEFAULT_AGGREGATE_TYPE,
) -> tuple[list[Decoded], list[Poison]]:
    """``decode`` each record: events (in arrival order) and poison."""
    return sort_out(decode(record, payloads, default_aggregate_type) for record in records)


def sort_out(results: Iterable[Decoded | Poison]) -> tuple[list[Decoded], list[Poison]]:
    """Decoded records (events, in arrival order) and poison, apart."""
    return _split(results, Decoded)


def validate_batch(
    items: list[Read], payloads: Container[str] | None = None
) -> tuple[list[Decoded], list[Poison]]:
    """``validate`` each read record: events (in arrival order) and poison."""
    return _split((validate(item, payloads) for item in items), Decoded)


def _split(results: Iterable[Any], kind: type) -> tuple[list[Any], list[Poison]]:
    good: list[Any] = []
    poison: list[Poison] = []
    for result in results:
        (good if isinstance(result, kind) else poison).append(result)
    return good, poison


def _summary(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(loc) for loc in error["loc"]) or "(root)"
        parts.append(f"{where}: {_message(error)}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _message(error: Any) -> str:
    """pydantic's message, said plainly where it would puzzle a producer's developer."""
    kind, message, found = error["type"], error["msg"], error.get("input")
    if kind == ID_TYPE_ERROR:
        shown = repr(found)
        return f"{message}, not {shown if len(shown) <= 40 else shown[:37] + '...'}"
    if kind == "string_pattern_mismatch" and isinstance(found, str):
        if error.get("ctx", {}).get("pattern") == NO_CONTROL_CHARACTERS:
            bad = next(c for c in found if ord(c) < 32 or ord(c) == 127)
            return (
                f"holds the control character U+{ord(bad):04X}, which no id or type name may "
                "hold (PostgreSQL cannot store NUL)"
            )
    if kind == "missing" and len(error["loc"]) == 1:
        elsewhere = LOOKED_ELSEWHERE.get(str(error["loc"][0]))
        if elsewhere:
            return f"{message} ({elsewhere})"
    if kind == "less_than_equal" and error["loc"] in (("aggregateVersion",), ("eventVersion",)):
        return f"{message} (versions are stored as 32-bit integers)"
    return message
