"""The migrations create exactly the tables the code declares, and can be undone.

Contract: ``upgrade_to_head`` on an empty database leaves a schema that
Alembic's autogenerate finds identical to ``app.db.tables.metadata`` plus
``handlers.example_metadata`` (so the hand-written revisions and the Table
definitions cannot drift apart unnoticed); the revision files are found in
the installed package, form one line ending at one head, and downgrading to
``base`` removes every table they created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect

from app.db.engine import create_engine
from app.db.migrate import MIGRATIONS_DIR, VERSION_TABLE, alembic_config, upgrade_to_head
from app.db.tables import metadata
from handlers import example_metadata

EVERY_TABLE = set(metadata.tables) | set(example_metadata.tables)


def schema_diffs(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return list(compare_metadata(context, [metadata, example_metadata]))  # type: ignore[arg-type]


def table_names(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


def downgrade_to_base(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, "base")


async def test_upgraded_schema_matches_the_table_definitions(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'schema.db'}"
    await upgrade_to_head(url)

    engine = create_engine(url)
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == EVERY_TABLE | {VERSION_TABLE}
        assert await connection.run_sync(schema_diffs) == []
    await engine.dispose()


def test_revisions_are_found_in_the_package_and_form_one_line() -> None:
    scripts = ScriptDirectory.from_config(alembic_config())

    assert Path(scripts.dir) == MIGRATIONS_DIR
    assert scripts.get_heads() == ["0002"]
    assert [rev.revision for rev in scripts.walk_revisions("base", "heads")] == ["0002", "0001"]
    for rev in scripts.walk_revisions():
        assert Path(rev.path).parent == MIGRATIONS_DIR / "versions"


async def test_downgrade_to_base_removes_every_table_and_upgrade_restores_them(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'roundtrip.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)

    async with engine.begin() as connection:
        await connection.run_sync(downgrade_to_base)
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == {VERSION_TABLE}

    await upgrade_to_head(url)
    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == EVERY_TABLE | {VERSION_TABLE}
    await engine.dispose()
