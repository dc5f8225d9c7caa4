"""The README's settings table names every setting, and each default as the code has it.

Contract: every field of ``app.settings.Settings`` appears in a row of the README's
settings table by its environment name, no row names a setting the code lacks, and the
default a row gives (its first value in backticks, or ``unset``) is the field's default.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any

from app.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"
NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")
# Rows whose default is words, not a value.
WORDED = {"CONSUMERS": "", "RETRY_DELAYS_RETIRED": "", "CLEANUP_INTERVAL": timedelta(0)}


def _rows() -> dict[str, str]:
    """Environment name -> the default cell, for each settings row of the README."""
    rows: dict[str, str] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for name in NAME.findall(cells[0]):
            rows[name] = cells[1] if len(cells) > 2 else ""
    return rows


def _shown(value: Any) -> str:
    """A default as the README writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, timedelta):
        return f"{value.days}d" if value.days and not value.seconds else f"{value.seconds}s"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_every_setting_has_a_row_and_every_row_a_setting() -> None:
    fields = {name.upper() for name in Settings.model_fields}
    rows = set(_rows())
    assert fields - rows == set(), "settings the README does not name"
    assert rows - fields == set(), "README rows naming no setting"


def test_each_row_gives_the_default_of_the_code() -> None:
    rows = _rows()
    for name, field in Settings.model_fields.items():
        env = name.upper()
        cell = rows[env]
        if env in WORDED:
            assert field.default == WORDED[env], env
            continue
        if cell.startswith("unset"):
            assert field.default is None, (env, field.default)
            continue
        shown = re.match(r"`([^`]*)`", cell)
        assert shown, (env, cell)
        assert shown.group(1) == _shown(field.default), (env, cell, field.default)
