"""The installed command, ``effectively-once``, reaches every command, and the module forms stay.

Contract: every console script declared in ``pyproject.toml`` names a callable
that exists; ``effectively-once --help`` lists ``demo``, ``trace`` and ``dlq``,
and ``effectively-once dlq --help`` the DLQ commands; ``python -m app`` and
``python -m dlq`` answer as before.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
SCRIPTS = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert ran.returncode == 0, ran.stderr
    return ran


def script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    module, _, function = SCRIPTS[name].partition(":")
    return run(
        "-c",
        f"import sys; sys.argv[1:] = {list(args)!r}; from {module} import {function} as f; f()",
    )


def test_every_console_script_names_a_callable() -> None:
    assert SCRIPTS == {"effectively-once": "app.__main__:main"}
    for target in SCRIPTS.values():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize(
    ("args", "listed"),
    [
        (("--help",), ("demo", "trace", "dlq")),
        (("dlq", "--help"), ("list", "show", "replay", "skip")),
    ],
)
def test_effectively_once_reaches_every_command(
    args: tuple[str, ...], listed: tuple[str, ...]
) -> None:
    shown = script("effectively-once", *args).stdout
    assert "Usage: effectively-once" in shown
    for command in listed:
        assert f" {command} " in shown


def test_the_module_forms_still_answer() -> None:
    assert "Usage: python -m app" in run("-m", "app", "--help").stdout
    assert "Usage: python -m dlq" in run("-m", "dlq", "--help").stdout
