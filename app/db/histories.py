"""Which Alembic histories a database gets: the framework's, then each handler package's.

The framework's revisions (``app/db/migrations/versions``) create the
framework's tables only, recorded in ``effectively_once_version``.

A handler module brings the tables of its own handlers as a folder named
``migrations`` beside it, holding Alembic revision files: in the package
itself for a package (``handlers/migrations/`` for ``handlers``), in the
module's package for a module (``shop/migrations/`` for ``shop.handlers``).
Each folder is a history of its own, recorded in a version table of its own
named after that package (``effectively_once_version_handlers``). It runs
only while one of its modules is among ``HANDLER_MODULES``; taken out of
them, its tables and version table are left as they are. A module without
such a folder has no tables of its own.
"""

from __future__ import annotations

import importlib.util
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.errors import ConfigurationError
from app.handler_modules import search_current_directory

FRAMEWORK_VERSIONS = Path(__file__).with_name("migrations") / "versions"
# Not Alembic's default ``alembic_version``: the application may keep its own
# Alembic history in the same database.
VERSION_TABLE = "effectively_once_version"
FOLDER = "migrations"
MAX_NAME = 63  # PostgreSQL's identifier limit (MySQL's is 64)


@dataclass(frozen=True)
class History:
    """A folder of Alembic revisions and the table recording how far a database got."""

    versions: Path
    version_table: str


FRAMEWORK = History(FRAMEWORK_VERSIONS, VERSION_TABLE)


def histories(handler_modules: Sequence[str] = ()) -> list[History]:
    """The framework's history, then one per migrations folder of ``handler_modules``."""
    search_current_directory()  # as the worker imports them (``app.handler_modules``)
    found = [FRAMEWORK]
    for name in handler_modules:
        history = handler_history(name)
        if history is not None and history not in found:
            found.append(history)
    return found


def handler_history(module: str) -> History | None:
    """The history ``module`` ships beside it, or ``None``.

    The module is found, not imported (a dotted name imports its parents).
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise ConfigurationError(f"HANDLER_MODULES: cannot import {module!r}: {exc}") from exc
    if spec is None:
        raise ConfigurationError(f"HANDLER_MODULES: cannot import {module!r}: no such module")
    if spec.submodule_search_locations:  # a package: its own folder
        owner, where = spec.name, Path(next(iter(spec.submodule_search_locations)))
    elif spec.origin:  # a module: its package's folder
        owner, where = spec.parent or spec.name, Path(spec.origin).parent
    else:
        return None
    folder = where / FOLDER
    if not folder.is_dir():
        return None
    return History(folder.resolve(), version_table_of(owner))


def version_table_of(package: str) -> str:
    """``effectively_once_version_<package>``, dots as underscores, cut to an identifier's size."""
    name = f"{VERSION_TABLE}_{package.replace('.', '_')}"
    if len(name) <= MAX_NAME:
        return name
    return f"{name[: MAX_NAME - 9]}_{zlib.crc32(name.encode()):08x}"
