"""texts.kind: a CHECK constraint naming the kinds of text a recording has

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 20:20:00

``texts.kind`` is one of ``transcript``, ``proofread`` or ``hints`` (``conveyor.kinds.TextKind``,
from which ``tables.py`` generates the same constraint); the database now refuses any other
word, as it does for ``media_items.kind`` and ``media_objects.role``. Every kind code ever wrote
is one of these, so no row changes and code from 0006 on still works with this schema
(``schema_compat`` is left as it is). On SQLite the table is rebuilt (batch mode), rows kept.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The words as of this revision (a later kind is a later revision), not imported from the enum.
_KINDS = "kind IN ('transcript', 'proofread', 'hints')"


def upgrade() -> None:
    with op.batch_alter_table("texts") as batch:
        batch.create_check_constraint(op.f("ck_texts_kind"), _KINDS)


def downgrade() -> None:
    with op.batch_alter_table("texts") as batch:
        batch.drop_constraint(op.f("ck_texts_kind"), type_="check")
