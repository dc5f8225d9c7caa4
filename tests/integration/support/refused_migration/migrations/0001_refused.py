"""A revision the database refuses: a column of a type that does not exist."""

from __future__ import annotations

from alembic import op

revision = "refused0001"
down_revision = None
branch_labels = ("refused_migration",)
depends_on = None


def upgrade() -> None:
    """Create a table the database refuses."""
    op.execute("CREATE TABLE refused_things (id no_such_type)")


def downgrade() -> None:
    """Nothing was created."""
