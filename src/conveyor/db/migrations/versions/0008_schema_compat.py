"""schema_compat: the oldest code a schema still works with (rolling upgrades)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 16:10:00

Every revision from here on says, in ``schema_compat.oldest_code``, the oldest code revision
(the newest migration a Conveyor release ships) that may run against the schema it leaves. A
revision that only adds (a table, a nullable column, an index) leaves it as it is; one that
removes or renames what older code uses raises it to the first revision whose code no longer
uses it. A process whose code is older than the schema it meets runs when its own newest
revision is at least ``oldest_code``, and otherwise exits 6 (``conveyor db upgrade`` order:
add first, remove in a later release). This revision only adds, so code at 0006 and 0007 still
works against it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "schema_compat",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("oldest_code", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schema_compat")),
    )
    op.bulk_insert(table, [{"id": 1, "oldest_code": "0006"}])


def downgrade() -> None:
    op.drop_table("schema_compat")
