"""Where a failed event goes next: a pure function of policy, attempt, error and clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from dlq.topics import dlt_topic, retry_topic


class DeadReason(StrEnum):
    """The ``dlt-reason`` header values."""

    RETRIES_EXHAUSTED = "retries-exhausted"
    NON_RETRYABLE = "non-retryable"
    UNDECODABLE = "undecodable"
    INVALID_SCHEMA = "invalid-schema"
    INVALID_HEADER = "invalid-header"
    UNSUPPORTED_VERSION = "unsupported-version"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The tiers of one source topic: ``delays[i]`` seconds before attempt ``i + 2``."""

    base_topic: str
    delays: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Route:
    """Next stop of a failed event: a retry tier (``due_at`` set) or the DLT (``dead`` set)."""

    topic: str
    attempts: int
    due_at: datetime | None = None
    dead: DeadReason | None = None


def route(policy: RetryPolicy, attempts: int, retryable: bool, now: datetime) -> Route:
    """The next stop after the ``attempts``-th failed attempt (the first run counts as 1)."""
    if attempts < 1:
        raise ValueError(f"attempts counts from 1, got {attempts}")
    if not retryable:
        return Route(dlt_topic(policy.base_topic), attempts, dead=DeadReason.NON_RETRYABLE)
    if attempts > len(policy.delays):
        return Route(dlt_topic(policy.base_topic), attempts, dead=DeadReason.RETRIES_EXHAUSTED)
    delay = policy.delays[attempts - 1]
    return Route(
        retry_topic(policy.base_topic, delay), attempts, due_at=now + timedelta(seconds=delay)
    )
