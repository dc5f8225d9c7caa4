"""``/ready``'s ``start`` check says what the worker's start is doing, and why it waits.

Contract: until the start is done the check fails, naming the step (``at``) and, once a
step paused on a failure, that failure's type and the first line of its text, with any
URL's password hidden; the next step forgets the last one's failure; once done, it
passes. A pause is counted as any other (``pauses.on_pause``).
"""

from __future__ import annotations

import pytest

from app.monitoring import pauses
from app.runtime.services import Starting


def test_a_start_not_begun_is_not_done() -> None:
    check = Starting().check()

    assert (check.name, check.ok) == ("start", False)
    assert check.detail.startswith("not done: not begun")


def test_a_paused_step_says_why_without_a_password(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = []
    monkeypatch.setattr(pauses, "on_pause", lambda *args: counted.append(args))
    starting = Starting()
    starting.at("migrating the schema")

    error = OSError("cannot reach postgresql://app:s3cret@db:5432/orders\nsecond line")
    starting.on_pause("schema migration", error, 1.0)

    detail = starting.check().detail
    assert detail.startswith("not done: migrating the schema; waiting, it met OSError: ")
    assert "s3cret" not in detail
    assert "second line" not in detail
    assert len(counted) == 1


def test_the_next_step_forgets_the_last_failure_and_done_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pauses, "on_pause", lambda *args: None)
    starting = Starting()
    starting.at("migrating the schema")
    starting.on_pause("schema migration", OSError("down"), 1.0)

    starting.at("opening the consumers' database connections")
    assert starting.check().detail == "not done: opening the consumers' database connections"

    starting.done = True
    assert (starting.check().ok, starting.check().detail) == (True, "done")
