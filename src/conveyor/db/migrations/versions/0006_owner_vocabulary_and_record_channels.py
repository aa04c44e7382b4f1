"""owner vocabulary hints; a record's choice of per-channel recognition

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "owner_vocabulary",
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("hints", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("owner", name=op.f("pk_owner_vocabulary")),
    )
    # NULL: the record predates the choice and follows [transcription] channels.
    op.add_column("audio_records", sa.Column("channels", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audio_records") as batch:
        batch.drop_column("channels")
    op.drop_table("owner_vocabulary")
