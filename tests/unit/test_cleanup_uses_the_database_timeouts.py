"""``python -m app cleanup`` connects with the ``DB_*_TIMEOUT_SECONDS`` settings.

Contract: the cleanup's engine gets the settings' ``db_timeouts`` (a cron job's long
deletes are bounded by ``DB_STATEMENT_TIMEOUT_SECONDS`` as the worker's statements
are), not the defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.db import cleanup_cli
from app.db.timeouts import DbTimeouts


def test_the_engine_gets_the_settings_timeouts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "clean.db").touch()  # a database to clean: a missing file is refused first
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'clean.db'}")
    monkeypatch.setenv("DB_STATEMENT_TIMEOUT_SECONDS", "0")
    monkeypatch.setenv("DB_CONNECT_TIMEOUT_SECONDS", "7")
    given: list[DbTimeouts] = []

    def engine(url: str, pool_size: int = 5, timeouts: Any = None) -> Any:
        given.append(timeouts)
        raise OSError("stop here")

    monkeypatch.setattr(cleanup_cli, "create_engine", engine)
    with pytest.raises(SystemExit):
        cleanup_cli.cleanup()

    [timeouts] = given
    assert (timeouts.statement, timeouts.connect) == (0, 7)
