"""web sign-in: passwords, admin flag, sign-in pause, browser sessions

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("password_hash", sa.String(length=200), nullable=True))
    op.add_column("users", sa.Column("is_admin", sa.Boolean(), server_default="0", nullable=False))
    op.add_column(
        "users", sa.Column("failed_sign_ins", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column("users", sa.Column("sign_in_paused_until", sa.Double(), nullable=True))
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_web_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_web_sessions_token_hash")),
    )
    op.create_index("ix_web_sessions_user_id", "web_sessions", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_web_sessions_user_id", table_name="web_sessions")
    op.drop_table("web_sessions")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("sign_in_paused_until")
        batch.drop_column("failed_sign_ins")
        batch.drop_column("is_admin")
        batch.drop_column("password_hash")
