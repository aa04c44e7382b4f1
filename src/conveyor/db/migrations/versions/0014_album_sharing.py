"""album sharing: album_shares, album_links, and who added each media item

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 20:05:00

``album_shares`` names the users an album is shared with and their role (``viewer``,
``contributor``); ``album_links`` holds the SHA-256 of each view-only link's token with its
optional expiry; ``media_items.added_by`` records who added an item (every existing item was
added by its owner, so it is filled with ``owner``). Only adds tables and a nullable column:
older code keeps working (its uploads leave ``added_by`` NULL, read as the owner, and it shows
nobody a shared album), so ``schema_compat.oldest_code`` stays as it is.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "album_shares",
        sa.Column("album_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.CheckConstraint("role IN ('viewer', 'contributor')", name=op.f("ck_album_shares_role")),
        sa.ForeignKeyConstraint(
            ["album_id"],
            ["albums.id"],
            name=op.f("fk_album_shares_album_id_albums"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_album_shares_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("album_id", "user_id", name=op.f("pk_album_shares")),
    )
    op.create_index("ix_album_shares_user_id", "album_shares", ["user_id"])
    op.create_table(
        "album_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("album_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["album_id"],
            ["albums.id"],
            name=op.f("fk_album_links_album_id_albums"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_album_links")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_album_links_token_hash")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_album_links_album_id", "album_links", ["album_id"])
    op.add_column("media_items", sa.Column("added_by", sa.String(length=100), nullable=True))
    op.execute("UPDATE media_items SET added_by = owner")


def downgrade() -> None:
    with op.batch_alter_table("media_items") as batch:
        batch.drop_column("added_by")
    op.drop_index("ix_album_links_album_id", table_name="album_links")
    op.drop_table("album_links")
    op.drop_index("ix_album_shares_user_id", table_name="album_shares")
    op.drop_table("album_shares")
