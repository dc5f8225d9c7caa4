"""Names of the retry-tier and dead-letter topics: the one place they are spelled.

``order-event-topic`` with delays 1, 5, 30, 300 s has the tiers
``order-event-topic.retry.1s``, ``.retry.5s``, ``.retry.30s``, ``.retry.5m`` and
the dead-letter topic ``order-event-topic.DLT``.
"""

from __future__ import annotations

import re

RETRY_INFIX = ".retry."
DLT_SUFFIX = ".DLT"


KAFKA_LONGEST_NAME = 249


def topic_name(longest: int = KAFKA_LONGEST_NAME) -> re.Pattern[str]:
    """What Kafka accepts as a topic name (ASCII letters, digits, ``.``, ``_`` and ``-``, not
    ``.`` or ``..``), at most ``longest`` characters (a column that holds it may be shorter
    than Kafka's). For ``fullmatch``."""
    return re.compile(rf"(?!\.\.?\Z)[A-Za-z0-9._-]{{1,{longest}}}")


def delay_label(seconds: float) -> str:
    """``1s``, ``90s``, ``5m``, ``1h``: the largest whole unit, else seconds (``0.5s``)."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{seconds:g}s"


_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def delay_seconds(label: str) -> float | None:
    """The delay ``delay_label`` spells as ``label`` (``30s``, ``5m``, ``1h``), or ``None``."""
    unit = _UNIT_SECONDS.get(label[-1:])
    try:
        amount = float(label[:-1])
    except ValueError:
        return None
    return None if unit is None or amount <= 0 else amount * unit


def retry_topic(base: str, delay_seconds: float) -> str:
    """The retry tier of ``base`` for events that wait ``delay_seconds``."""
    return f"{base}{RETRY_INFIX}{delay_label(delay_seconds)}"


def dlt_topic(base: str) -> str:
    """The dead-letter topic of ``base``."""
    return f"{base}{DLT_SUFFIX}"


def retry_topics(base: str, delays: tuple[float, ...]) -> list[str]:
    """Every retry tier of ``base``, shortest delay first."""
    return [retry_topic(base, delay) for delay in delays]
