"""web sign-in: failed sign-ins per client address

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 11:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sign_in_addresses",
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_failed_at", sa.Double(), nullable=False),
        sa.Column("paused_until", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("address", name=op.f("pk_sign_in_addresses")),
    )


def downgrade() -> None:
    op.drop_table("sign_in_addresses")
