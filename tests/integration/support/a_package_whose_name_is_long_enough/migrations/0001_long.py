"""One table, so that the history has something to record."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "long0001"
down_revision = None
branch_labels = ("a_package_whose_name_is_long_enough",)
depends_on = None


def upgrade() -> None:
    """Create the table."""
    op.create_table("long_named_things", sa.Column("id", sa.Integer, primary_key=True))


def downgrade() -> None:
    """Drop it."""
    op.drop_table("long_named_things")
