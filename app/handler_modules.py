"""``HANDLER_MODULES``: where a worker's handlers come from.

Names resolve as uvicorn resolves its app: from the current directory first, so
``HANDLER_MODULES=revenue faust -A app worker`` run in the folder holding
``revenue/`` finds it without ``PYTHONPATH`` (the ``faust`` script puts its own
folder, not the current one, at the head of ``sys.path``). The worker, the
migrations and ``trace`` all look the same way.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from app.errors import ConfigurationError


def search_current_directory() -> None:
    """Put the current directory at the head of ``sys.path`` unless it is there already."""
    here = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.insert(0, here)


def import_handler_modules(names: Sequence[str]) -> None:
    """Import ``names`` (found from the current directory first) so their ``@handler``s
    register; a module that cannot be found is a ``ConfigurationError``."""
    search_current_directory()
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise ConfigurationError(f"HANDLER_MODULES: cannot import {name!r}: {exc}") from exc

