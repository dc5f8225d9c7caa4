"""The migrations create exactly the tables the code declares, and can be undone.

Contract: ``upgrade_to_head`` on an empty database creates the framework's
tables only, a schema Alembic's autogenerate finds identical to
``app.db.tables.metadata``; with ``handlers`` among the handler modules, the
example package's own history adds exactly ``handlers.example_metadata``
(so the hand-written revisions and the Table definitions cannot drift apart
unnoticed). Both histories are found in the installed packages, each forms
one line ending at one head (the framework's ``0002`` stays resolvable),
each is recorded in its own version table, and downgrading a history to
``base`` removes every table it created and nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData, inspect

import handlers
from app.db.engine import create_engine
from app.db.histories import FRAMEWORK, History, histories
from app.db.migrate import alembic_config, upgrade_to_head
from app.db.tables import metadata
from handlers import example_metadata

EXAMPLE = History(
    (Path(handlers.__file__).parent / "migrations").resolve(), "effectively_once_version_handlers"
)
FRAMEWORK_TABLES = set(metadata.tables) | {FRAMEWORK.version_table}
EXAMPLE_TABLES = set(example_metadata.tables) | {EXAMPLE.version_table}


def not_a_version_table(name: str | None, type_: str, parent: Any) -> bool:
    return not (type_ == "table" and (name or "").startswith(FRAMEWORK.version_table))


def schema_diffs(connection: Connection, declared: list[MetaData]) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"include_name": not_a_version_table})
    return list(compare_metadata(context, declared))  # type: ignore[arg-type]


def table_names(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


def downgrade_to_base(connection: Connection, history: History) -> None:
    config = alembic_config(history)
    config.attributes["connection"] = connection
    command.downgrade(config, "base")


async def test_the_framework_alone_creates_only_its_own_tables(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'framework.db'}"
    await upgrade_to_head(url)

    engine = create_engine(url)
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == FRAMEWORK_TABLES
        assert await connection.run_sync(schema_diffs, [metadata]) == []
    await engine.dispose()


async def test_with_the_examples_the_schema_matches_both_table_definitions(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'schema.db'}"
    await upgrade_to_head(url, ["handlers"])

    engine = create_engine(url)
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == FRAMEWORK_TABLES | EXAMPLE_TABLES
        assert await connection.run_sync(schema_diffs, [metadata, example_metadata]) == []
    await engine.dispose()


def test_each_history_is_found_in_its_package_and_forms_one_line() -> None:
    assert histories(["handlers"]) == [FRAMEWORK, EXAMPLE]
    assert histories(["handlers", "handlers.points", "schemas"]) == [FRAMEWORK, EXAMPLE]
    lines = (
        (FRAMEWORK, ["0008", "0007", "0006", "0005", "0004", "0003", "0002", "0001"]),
        (EXAMPLE, ["0003", "0002", "0001"]),
    )
    for history, line in lines:
        scripts = ScriptDirectory.from_config(alembic_config(history))
        assert scripts.get_heads() == [line[0]]
        assert [rev.revision for rev in scripts.walk_revisions("base", "heads")] == line
        for rev in scripts.walk_revisions():
            assert Path(rev.path).parent == history.versions


async def test_downgrading_a_history_removes_its_tables_and_upgrade_restores_them(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'roundtrip.db'}"
    await upgrade_to_head(url, ["handlers"])
    engine = create_engine(url)

    async with engine.begin() as connection:
        await connection.run_sync(downgrade_to_base, EXAMPLE)
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == FRAMEWORK_TABLES | {EXAMPLE.version_table}
    async with engine.begin() as connection:
        await connection.run_sync(downgrade_to_base, FRAMEWORK)
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == {
            FRAMEWORK.version_table,
            EXAMPLE.version_table,
        }

    await upgrade_to_head(url, ["handlers"])
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == FRAMEWORK_TABLES | EXAMPLE_TABLES
    await engine.dispose()
