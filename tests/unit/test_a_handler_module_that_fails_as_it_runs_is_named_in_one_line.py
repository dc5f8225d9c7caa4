"""A handler module whose code fails as it is imported is one line at start: what and where.

Contract: ``HANDLER_MODULES`` naming a module that raises while it is imported (an
``ImportError`` of a name, a ``NameError``, anything its top level raises) raises
``ConfigurationError`` (the worker prints it as one line and exits 2) naming the module,
the exception's type and message, and the file and line of the package that raised it,
with no traceback; so does a module it imports that is missing (the line importing it
named). (Anything but a missing module or a syntax error printed faust's traceback and
exited 1.)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.errors import ConfigurationError
from app.handler_modules import import_handler_modules


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "failing_service_pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("from failing_service_pkg import handlers\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    yield folder
    for name in [m for m in sys.modules if m.startswith("failing_service_pkg")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("import os\nfrom os import no_such_name\n", "ImportError: cannot import name"),
        ("X = 1\nY = undefined_name\n", "NameError: name 'undefined_name' is not defined"),
        ("\nraise RuntimeError('no config file')\n", "RuntimeError: no config file"),
    ],
)
def test_the_exception_and_its_line_are_named(package: Path, source: str, said: str) -> None:
    (package / "handlers.py").write_text(source)

    with pytest.raises(ConfigurationError) as refused:
        import_handler_modules(["failing_service_pkg"])

    text = str(refused.value)
    assert text.startswith("HANDLER_MODULES: importing 'failing_service_pkg' failed: "), text
    assert said in text
    assert text.endswith(f"({package / 'handlers.py'}, line 2)"), text
    assert "\n" not in text
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_a_module_it_imports_that_is_missing_is_named_with_the_line(package: Path) -> None:
    (package / "handlers.py").write_text("import json\nimport revenue_models_typo\n")

    with pytest.raises(ConfigurationError) as refused:
        import_handler_modules(["failing_service_pkg"])

    assert str(refused.value) == (
        "HANDLER_MODULES: cannot import 'failing_service_pkg': No module named "
        f"'revenue_models_typo' ({package / 'handlers.py'}, line 2)"
    )


def test_a_listed_module_that_is_missing_is_named_alone(package: Path) -> None:
    (package / "handlers.py").write_text("")

    with pytest.raises(ConfigurationError) as refused:
        import_handler_modules(["failing_service_pkg.nowhere"])

    assert str(refused.value) == (
        "HANDLER_MODULES: cannot import 'failing_service_pkg.nowhere': No module named "
        "'failing_service_pkg.nowhere'"
    )
