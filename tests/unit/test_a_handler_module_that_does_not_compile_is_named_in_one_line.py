"""A handler module with a syntax error is one line at start, naming the file and line.

Contract: ``HANDLER_MODULES`` naming a module whose source does not compile raises
``ConfigurationError`` (the worker prints it as one line and exits 2) saying the module,
the compiler's message, the file and the line, with no traceback of the import machinery.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.errors import ConfigurationError
from app.handler_modules import import_handler_modules


def test_a_syntax_error_is_named_with_its_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "broken_service_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from broken_service_pkg import handlers\n")
    (package / "handlers.py").write_text("async def f(:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])

    with pytest.raises(ConfigurationError) as refused:
        import_handler_modules(["broken_service_pkg"])

    said = str(refused.value)
    assert said.startswith("HANDLER_MODULES: 'broken_service_pkg' does not compile: ")
    assert f"({package / 'handlers.py'}, line 1)" in said
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
    for name in [m for m in sys.modules if m.startswith("broken_service_pkg")]:
        del sys.modules[name]
