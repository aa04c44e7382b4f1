"""motion photos and Live Photos: the ``motion`` roles and media items' content identifier

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 20:16:29

``media_objects.role`` takes two more words (its CHECK constraint is generated from
``kinds.Role``): ``motion``, the H.264/AAC web-playable clip of a motion photo or a Live Photo,
and ``motion_original``, a Live Photo's movie as uploaded. ``media_items.content_id`` holds the
content identifier both halves of a Live Photo carry (NULL for every item before this revision),
indexed by album for pairing. Only widens a constraint and adds a nullable column: older code
keeps working (it writes neither and does not read them), so ``schema_compat.oldest_code``
stays as it is.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = ("original", "thumb", "medium", "preview", "poster", "playback")
_AFTER = (*_BEFORE, "motion", "motion_original")


def _roles(words: tuple[str, ...]) -> str:
    return "role IN (" + ", ".join(f"'{w}'" for w in words) + ")"


def upgrade() -> None:
    # SQLite cannot alter a constraint: batch mode rebuilds the table (rows, keys and all).
    with op.batch_alter_table("media_objects") as batch:
        batch.drop_constraint(op.f("ck_media_objects_role"), type_="check")
        batch.create_check_constraint(op.f("ck_media_objects_role"), _roles(_AFTER))
    op.add_column("media_items", sa.Column("content_id", sa.String(length=64), nullable=True))
    op.create_index("ix_media_items_content_id", "media_items", ["album_id", "content_id"])


def downgrade() -> None:
    op.drop_index("ix_media_items_content_id", table_name="media_items")
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35+): a batch rebuild would rewrite media_items'
    # CREATE TABLE text, which revision 0015's downgrade reads.
    op.drop_column("media_items", "content_id")
    op.execute("DELETE FROM media_objects WHERE role IN ('motion', 'motion_original')")
    with op.batch_alter_table("media_objects") as batch:
        batch.drop_constraint(op.f("ck_media_objects_role"), type_="check")
        batch.create_check_constraint(op.f("ck_media_objects_role"), _roles(_BEFORE))
