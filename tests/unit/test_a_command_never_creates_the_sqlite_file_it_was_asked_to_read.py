"""A command asked to read or clean a SQLite file that does not exist says so, and creates none.

Contract: ``python -m app outbox list``, ``python -m app cleanup`` and ``python -m app
trace``, given a SQLite URL whose file is not there (a typo, or the command run from
another folder than the service's), exit with code 2 and one line ``no SQLite database
at <path>``, and leave no file behind. Before, the outbox and cleanup commands created
an empty file and then failed on its missing tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.__main__ import build_cli


@pytest.mark.parametrize(
    ("args", "via_option"),
    [
        (["outbox", "list"], True),
        (["cleanup"], False),
        (["trace", "e-1"], True),
    ],
)
def test_a_missing_sqlite_file_is_one_line_and_stays_missing(
    tmp_path: Path, args: list[str], via_option: bool
) -> None:
    typo = tmp_path / "ordres.db"
    url = f"sqlite+aiosqlite:///{typo}"
    if via_option:
        result = CliRunner().invoke(build_cli(), [*args, "--database-url", url])
    else:
        result = CliRunner().invoke(build_cli(), args, env={"DATABASE_URL": url})

    assert result.exit_code == 2, result.output
    assert f"no SQLite database at {typo}" in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not typo.exists()
