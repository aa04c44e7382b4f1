"""media items: the zone a photo or video was taken in, and a flag for a video cut short

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 16:45:00

``captured_offset`` is the capture's zone in minutes east of UTC (NULL: unknown, as for every
item before this revision); ``incomplete`` marks a video whose frames stop short of the
duration its header declares. Only adds nullable or defaulted columns, so
``schema_compat.oldest_code`` stays as it is.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("media_items", sa.Column("captured_offset", sa.SmallInteger(), nullable=True))
    op.add_column(
        "media_items",
        sa.Column("incomplete", sa.Boolean(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("media_items") as batch:
        batch.drop_column("incomplete")
        batch.drop_column("captured_offset")
