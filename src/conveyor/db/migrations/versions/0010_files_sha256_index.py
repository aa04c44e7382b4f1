"""an index on the object journal's SHA-256: intake finds content an owner already holds

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 16:20:00

Only adds an index, so ``schema_compat.oldest_code`` stays as it is: code of the previous
release works on the upgraded schema (it just does not look for duplicates).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_files_sha256"), "files", ["sha256"])


def downgrade() -> None:
    op.drop_index(op.f("ix_files_sha256"), table_name="files")
