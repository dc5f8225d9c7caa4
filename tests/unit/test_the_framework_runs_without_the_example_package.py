"""Deleting ``handlers/`` leaves a working framework, and a user's package brings its own tables.

Contract: in a copy of the framework without the example package (and with
nothing of the checkout importable), ``handlers`` cannot be imported, yet
``python -m app.db.migrate`` with ``HANDLER_MODULES=shop`` creates exactly the
framework's tables and the table of ``shop``'s own migration (each history
in its own version table), the worker's faust app builds with ``shop``'s
consumer, and ``python -m app`` and ``python -m dlq`` answer ``--help``.
A real worker of such a copy applying events: ``tests/integration/
test_a_users_own_handlers_run_without_the_example_package.py``.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from app.db.tables import metadata
from tests.framework_copy import CONSUMER, TABLE, framework_without_examples

BUILD_THE_WORKER = """
import faust
import app
print(isinstance(app.app, faust.App), app.app.conf.id)
from app.registry import default_registry
print(default_registry.consumers)
"""


def run(copy: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=copy,
        env={**os.environ, "PYTHONPATH": str(copy), "TMPDIR": str(copy), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_migrate_builds_and_commands_work_without_the_examples(tmp_path: Path) -> None:
    copy = framework_without_examples(tmp_path / "service")
    database = tmp_path / "service.db"
    settings = {"DATABASE_URL": f"sqlite:///{database}", "HANDLER_MODULES": "shop"}

    missing = run(copy, "-c", "import handlers")
    assert missing.returncode == 1 and "No module named 'handlers'" in missing.stderr

    migrated = run(copy, "-m", "app.db.migrate", **settings)
    assert migrated.returncode == 0, migrated.stderr
    with sqlite3.connect(database) as conn:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        versions = {
            table: conn.execute(f"SELECT version_num FROM {table}").fetchall()
            for table in ("effectively_once_version", "effectively_once_version_shop")
        }
    assert tables == set(metadata.tables) | {TABLE, *versions}
    assert versions == {
        "effectively_once_version": [("0008",)],
        "effectively_once_version_shop": [("0001",)],
    }

    built = run(copy, "-c", BUILD_THE_WORKER, **settings, APP_ID="shop-consumers")
    assert built.returncode == 0, built.stderr
    assert built.stdout.split("\n")[:2] == ["True shop-consumers", f"['{CONSUMER}']"]

    for command in (["-m", "app", "--help"], ["-m", "dlq", "--help"]):
        answered = run(copy, *command, **settings)
        assert answered.returncode == 0, answered.stderr
        assert "Usage" in answered.stdout
