"""The envelope our users' producers already emit (camelCase JSON).

Every field that reaches the framework's tables is bounded to what they store
(``app.db.tables``): ids and type names as long as their columns and without
control characters, versions within the 32-bit ``Integer`` columns. A value
outside those bounds is poison (``invalid-schema``), not a database error that
would stop every worker reading the partition.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic.alias_generators import to_camel

from app.db.tables import AGG_ID, AGG_TYPE, EVENT_ID, EVENT_TYPE, INTEGER_MAX
from schemas.ids import NO_CONTROL_CHARACTERS, Id, IdField

DataT = TypeVar("DataT")

EventType = Annotated[
    str, StringConstraints(min_length=1, max_length=EVENT_TYPE, pattern=NO_CONTROL_CHARACTERS)
]
AggregateType = Annotated[
    str, StringConstraints(min_length=1, max_length=AGG_TYPE, pattern=NO_CONTROL_CHARACTERS)
]
Version = Annotated[int, Field(ge=1, le=INTEGER_MAX)]
_HOURS_OFFSET = re.compile(r"[+-]\d\d")


def _moment(value: Any, read: ValidatorFunctionWrapHandler) -> datetime:
    """``occurredAt`` as pydantic reads a datetime (ISO-8601, or seconds since the epoch,
    milliseconds beyond 2e10), and also with an offset of hours alone (``+00``: PostgreSQL's
    text of a ``timestamptz``); one without an offset is UTC."""
    try:
        moment: datetime = read(value)
    except ValidationError as refused:
        if not (isinstance(value, str) and _HOURS_OFFSET.fullmatch(value[-3:])):
            raise
        try:
            moment = read(f"{value}:00")
        except ValidationError:
            raise refused from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


Moment = Annotated[datetime, WrapValidator(_moment)]


class Envelope(BaseModel, Generic[DataT]):
    """Event metadata plus ``data``; unknown extra fields are tolerated.

    A handler receives an ``Event`` (an envelope whose ``data`` is the typed
    payload model of its ``eventType`` and ``eventVersion``).
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    event_id: Annotated[str, IdField(max_length=EVENT_ID, stored=True)]
    event_type: EventType
    event_version: Version
    aggregate_type: AggregateType
    aggregate_id: Annotated[str, IdField(max_length=AGG_ID, stored=True)]
    aggregate_version: Version | None = None
    occurred_at: Moment
    trace_id: Id | None = None
    tenant_id: Id | None = None
    source: str | None = None
    correlation_id: Id | None = None
    causation_id: Id | None = None
    data: DataT

    @property
    def aggregate(self) -> tuple[str, str]:
        """``(aggregateType, aggregateId)``: the unit of ordering."""
        return (self.aggregate_type, self.aggregate_id)


RawEnvelope = Envelope[dict[str, Any]]
Event = Envelope[Any]
