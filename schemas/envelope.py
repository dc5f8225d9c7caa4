"""The envelope our users' producers already emit (camelCase JSON)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

DataT = TypeVar("DataT")


class Envelope(BaseModel, Generic[DataT]):
    """Event metadata plus ``data``; unknown extra fields are tolerated.

    A handler receives an ``Event`` (an envelope whose ``data`` is the typed
    payload model of its ``eventType`` and ``eventVersion``).
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    event_id: str = Field(min_length=1, max_length=128)
    event_type: str = Field(min_length=1, max_length=100)
    event_version: int = Field(ge=1)
    aggregate_type: str = Field(min_length=1, max_length=100)
    aggregate_id: str = Field(min_length=1, max_length=128)
    aggregate_version: int | None = Field(default=None, ge=1)
    occurred_at: datetime
    trace_id: str | None = None
    tenant_id: str | None = None
    source: str | None = None
    correlation_id: str | None = None
    causation_id: str | None = None
    data: DataT

    @property
    def aggregate(self) -> tuple[str, str]:
        """``(aggregateType, aggregateId)``: the unit of ordering."""
        return (self.aggregate_type, self.aggregate_id)


RawEnvelope = Envelope[dict[str, Any]]
Event = Envelope[Any]
