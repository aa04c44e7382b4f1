"""step_started_at (D18, lost workers); indexes for rescue first (D19) and the rescuer

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 16:00:00

* ``step_started_at`` on every record table: when the current claim's step started. Claims
  made before this revision carry none: they lapse as claims that never started (nothing
  counted), as every lapse did before.
* ``ix_<table>_begun``: records already begun in their stage (never done: an advance clears the
  mark), in the claim's order; the claim takes them before records not begun (D19).
* ``ix_<table>_started``: records whose step runs now, for the rescuer (D18).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEGUN = sa.text("work_started_at IS NOT NULL AND halted_at IS NULL")
_STARTED = sa.text("step_started_at IS NOT NULL")
_TABLES = {"audio_records": "created_at", "media_items": "uploaded_at"}


def upgrade() -> None:
    for table, sort in _TABLES.items():
        op.add_column(table, sa.Column("step_started_at", sa.Double(), nullable=True))
        op.create_index(
            f"ix_{table}_begun",
            table,
            [sort, "id"],
            unique=False,
            postgresql_where=_BEGUN,
            sqlite_where=_BEGUN,
        )
        op.create_index(
            f"ix_{table}_started",
            table,
            ["id"],
            unique=False,
            postgresql_where=_STARTED,
            sqlite_where=_STARTED,
        )


def downgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"ix_{table}_started", table_name=table)
        op.drop_index(f"ix_{table}_begun", table_name=table)
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_column("step_started_at")
