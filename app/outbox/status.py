"""The life of an outbox row, and the one name its own records are filed under."""

from __future__ import annotations

from enum import StrEnum


class OutboxStatus(StrEnum):
    """``outbox_event.status``.

    ``PENDING`` (waiting, perhaps until ``next_retry_at``) -> ``PROCESSING`` (a relay
    holds it until ``lease_expires_at``) -> ``PUBLISHED``; after ``RELAY_MAX_ATTEMPTS``
    failed publishes, ``DEAD`` (an operator re-queues it: ``PENDING`` again).
    """

    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    PUBLISHED = "PUBLISHED"
    DEAD = "DEAD"


UNPUBLISHED = (OutboxStatus.PENDING, OutboxStatus.PROCESSING)
"""The statuses that hold back the later rows of their aggregate."""

RECORD_AGGREGATE_TYPE = "effectively-once"
"""``aggregate_type`` of the worker's own retry and dead-letter records: a namespace of
their own, so they never wait for, nor hold up, a business aggregate's rows."""
