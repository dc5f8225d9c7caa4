"""``sent(engine)``: every statement an engine sends while the block runs, with its parameters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event


@contextmanager
def sent(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """``(statement, parameters)`` of every statement ``engine`` sends meanwhile, in order
    (an async engine's: pass its ``sync_engine``)."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)
