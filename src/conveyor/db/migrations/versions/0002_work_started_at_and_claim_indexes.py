"""work_started_at (D3: the stuck countdown starts at the first claim) and partial claim indexes

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:00:00

* ``work_started_at`` on every record table: the first claim in the current stage. Records that
  have already been claimed in their stage (a claim, a failure or a retry pause on them) keep
  their countdown from ``state_entered_at``; records that never were are backlog and start
  theirs at their first claim.
* The claim indexes follow the claim's filter and order (P5): the sort value then the primary
  key, over open records only (not halted, not ``done``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = sa.text("halted_at IS NULL AND stage <> 'done'")
_TABLES = {"audio_records": "created_at", "media_items": "uploaded_at"}


def upgrade() -> None:
    for table, sort in _TABLES.items():
        op.add_column(table, sa.Column("work_started_at", sa.Double(), nullable=True))
        op.execute(
            f"UPDATE {table} SET work_started_at = state_entered_at "
            "WHERE claim_token IS NOT NULL OR attempts > 0 OR retry_at IS NOT NULL"
        )
        op.drop_index(f"ix_{table}_claim", table_name=table)
        op.create_index(
            f"ix_{table}_claim",
            table,
            [sort, "id"],
            unique=False,
            postgresql_where=_OPEN,
            sqlite_where=_OPEN,
        )


def downgrade() -> None:
    for table, sort in _TABLES.items():
        op.drop_index(f"ix_{table}_claim", table_name=table)
        op.create_index(f"ix_{table}_claim", table, ["stage", "halted_at", sort], unique=False)
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_column("work_started_at")
