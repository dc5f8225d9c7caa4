"""A worker started without ``HANDLER_MODULES`` says that it runs the bundled example.

Contract of ``app.runtime.services.warn_if_the_example_runs``: when the setting was not
given (its default names the example package ``handlers``), one WARNING names the
package and tells to set ``HANDLER_MODULES``; when it was given, even as ``handlers``,
nothing is said. ``python -m app.db.migrate`` (run by hand after a restore, say) says
the same on stderr once it has migrated the example's tables, and nothing when it was given.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.db.migrate import main as migrate
from app.runtime.services import warn_if_the_example_runs
from app.settings import Settings


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_unset_it_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("HANDLER_MODULES", raising=False)
    with caplog.at_level(logging.WARNING):
        warn_if_the_example_runs(Settings())
    [line] = warnings_of(caplog)
    assert line.startswith("HANDLER_MODULES is not set: this worker runs the bundled example")
    assert "'handlers'" in line


@pytest.mark.parametrize("modules", ["handlers", "shipping"])
def test_given_it_is_quiet(
    modules: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("HANDLER_MODULES", modules)
    with caplog.at_level(logging.WARNING):
        warn_if_the_example_runs(Settings())
    assert warnings_of(caplog) == []


@pytest.mark.parametrize("modules", [None, "handlers"])
def test_migrate_says_so_too(
    modules: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'restored.db'}")
    if modules is None:
        monkeypatch.delenv("HANDLER_MODULES", raising=False)
    else:
        monkeypatch.setenv("HANDLER_MODULES", modules)

    migrate([])

    said = capsys.readouterr().err
    if modules is None:
        assert "HANDLER_MODULES is not set: the bundled example consumers' tables" in said
        assert "'handlers'" in said
    else:
        assert "HANDLER_MODULES" not in said
