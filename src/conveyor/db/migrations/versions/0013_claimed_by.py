"""every claim names its holder: claimed_by on the record tables, holder on worker_processes

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 17:10:00

Only adds nullable columns: code from 0006 on still works with this schema (schema_compat is
left as it is); an older worker's claims leave claimed_by NULL.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("audio_records", "media_items"):
        op.add_column(table, sa.Column("claimed_by", sa.String(length=32), nullable=True))
    op.add_column("worker_processes", sa.Column("holder", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("worker_processes") as batch:
        batch.drop_column("holder")
    for table in ("media_items", "audio_records"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("claimed_by")
