"""idempotency keys of uploads

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("record_id", sa.Integer(), nullable=True),
        sa.Column("item_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.CheckConstraint(
            "(record_id IS NULL) <> (item_id IS NULL)",
            name=op.f("ck_idempotency_keys_one_target"),
        ),
        sa.ForeignKeyConstraint(
            ["item_id"],
            ["media_items.id"],
            name=op.f("fk_idempotency_keys_item_id_media_items"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["record_id"],
            ["audio_records.id"],
            name=op.f("fk_idempotency_keys_record_id_audio_records"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint(
            "owner", "scope", "key", name=op.f("uq_idempotency_keys_owner_scope_key")
        ),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
