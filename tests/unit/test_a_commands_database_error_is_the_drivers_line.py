"""A database error in ``trace`` or ``outbox`` is the driver's own line.

Contract: a database the command reaches but cannot read is one line on stderr naming the
database and what the driver said (``file is not a database``), exit code 2, without
SQLAlchemy's wrapper (``(sqlite3.DatabaseError)``, ``(sqlalchemy.dialects...)``), the
statement or a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.__main__ import build_cli


@pytest.mark.parametrize("command", [["trace", "e-1"], ["outbox", "list"]])
def test_a_file_that_is_no_database_is_one_line(tmp_path: Path, command: list[str]) -> None:
    garbage = tmp_path / "not-a.db"
    garbage.write_bytes(b"this is no SQLite database, only text" * 100)
    url = f"sqlite+aiosqlite:///{garbage}"

    result = CliRunner().invoke(build_cli(), [*command, "--database-url", url])

    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith(": file is not a database"), lines
    assert "not-a.db" in lines[0]
    assert "(sqlite3" not in lines[0] and "sqlalchemy" not in lines[0].lower()
