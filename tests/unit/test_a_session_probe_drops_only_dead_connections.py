"""The session probe's verdict: a waiting connection is dead only when the server says so.

Contract (``app.db.liveness.is_dead``): a session the server no longer has is dead at
once; a busy session (running the statement, waiting for a lock) is never dead, however
long it takes; an idle session is dead only when a probe at least
``IDLE_CONFIRM_SECONDS`` earlier in the same wait found it idle too and it stayed idle
all the while (its request never arrived, or its answer was lost); one idle look, or
one that ran a command in between, is not enough.
"""

from __future__ import annotations

import pytest

from app.db.liveness import IDLE_CONFIRM_SECONDS, Seen, is_dead

NOW = 1_000.0


@pytest.mark.parametrize(
    ("seen", "idle_from", "dead"),
    [
        (None, None, True),  # the server freed the session
        (None, NOW - 5, True),
        (Seen(idle=False), None, False),  # running, or waiting for a lock
        (Seen(idle=False), NOW - 30, False),
        (Seen(idle=True, idle_seconds=40), None, False),  # one look: the answer may be on its way
        (Seen(idle=True, idle_seconds=3), NOW - IDLE_CONFIRM_SECONDS / 2, False),  # too soon
        (Seen(idle=True, idle_seconds=3), NOW - IDLE_CONFIRM_SECONDS, True),
        (Seen(idle=True, idle_seconds=12), NOW - 10, True),
        (Seen(idle=True, idle_seconds=9), NOW - 10, True),  # whole seconds (MySQL)
        (Seen(idle=True, idle_seconds=0.5), NOW - 10, False),  # it ran a command in between
    ],
)
def test_the_verdict(seen: Seen | None, idle_from: float | None, dead: bool) -> None:
    assert is_dead(seen, idle_from, NOW) is dead
