"""The relay's default lease outlasts a database connection that went silent.

Contract: a relay that published and then finds its connection silent gives the
connection up at ``DB_RESPONSE_TIMEOUT_SECONDS`` and reconnects within
``DB_CONNECT_TIMEOUT_SECONDS``; only a lease longer than both together lets it mark
its rows published before another relay may claim them and publish them again. The
defaults keep that margin; a configuration that does not is named in one warning at
the relay's start, with both figures, and a long enough lease gets none.
"""

from __future__ import annotations

import pytest

from app.outbox.runner import short_lease
from app.settings import Settings

SQLITE = "sqlite+aiosqlite:///unused.db"


def test_the_default_lease_outlasts_the_response_deadline_and_a_reconnect() -> None:
    settings = Settings(database_url=SQLITE)
    assert settings.relay_lease_seconds > (
        settings.db_response_timeout_seconds + settings.db_connect_timeout_seconds
    )
    assert short_lease(settings) is None


@pytest.mark.parametrize("lease", [2, 30, 45])
def test_a_lease_the_deadlines_outlast_is_named_with_both_figures(lease: float) -> None:
    settings = Settings(database_url=SQLITE, relay_lease_seconds=lease)
    warning = short_lease(settings)
    assert warning is not None
    assert f"RELAY_LEASE_SECONDS ({lease:g})" in warning
    assert "(45)" in warning  # 35 s response deadline + 10 s to connect again


def test_a_lease_longer_than_both_deadlines_is_quiet() -> None:
    settings = Settings(
        database_url=SQLITE,
        relay_lease_seconds=20,
        db_statement_timeout_seconds=5,
        db_response_timeout_seconds=10,
        db_connect_timeout_seconds=5,
    )
    assert short_lease(settings) is None
