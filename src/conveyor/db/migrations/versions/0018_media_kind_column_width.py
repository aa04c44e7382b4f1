"""media_items.kind: VARCHAR(32), room for a kind's word longer than eight letters

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 03:30:00

``media_items.kind`` was ``VARCHAR(8)``: ``photo`` and ``video`` fit, a word such as
``animation`` would not (PostgreSQL refuses it before the CHECK constraint is asked). It is
``VARCHAR(32)`` now, as ``texts.kind`` and the stage columns are, so a new kind is its member of
``kinds.MediaKind`` and a revision widening the CHECK constraint alone. The constraint is left as
it is (``photo``, ``video``; ``tables.py`` generates the same from the enum).

PostgreSQL changes the column's type in place (no row is rewritten for a wider ``VARCHAR``).
SQLite keeps a column's declared type only in the table's stored ``CREATE TABLE`` text (it
enforces no length), so that text is what changes: the table is rebuilt by SQLite's own
procedure, as revision 0015 rebuilds it (sqlite.org/lang_altertable.html, "making other kinds of
table schema changes"), with only the ``kind`` column's type changed, every row copied, its
indexes made again from their stored text, the highest id ever used kept (``sqlite_sequence``:
ids are still never reused), foreign keys off meanwhile (dropping the old table
with them on would delete every role row and album event that cascades from it) and ``PRAGMA
foreign_key_check`` before the commit. Only widens: older code still works (``schema_compat``
is left as it is).
"""

import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "media_items"
_NARROW, _WIDE = 8, 32


def upgrade() -> None:
    _set_width(_NARROW, _WIDE)


def downgrade() -> None:
    # Every kind up to this revision (photo, video) fits in eight letters.
    _set_width(_WIDE, _NARROW)


def _set_width(before: int, after: int) -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column(
            _TABLE,
            "kind",
            type_=sa.String(after),
            existing_type=sa.String(before),
            existing_nullable=False,
        )
        return
    # The driver's own connection: the PRAGMA must run between two transactions. What earlier
    # revisions of this upgrade did is committed first, with their version row; this
    # revision's own commits last, with its row.
    raw: Any = op.get_bind().connection.dbapi_connection
    if raw.in_transaction:
        raw.execute("COMMIT")
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        raw.execute("BEGIN IMMEDIATE")
        _rebuild(raw, before, after)
        broken = raw.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"foreign keys broken by the rebuild: {broken[:5]}")
        raw.execute("COMMIT")
    finally:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raw.execute("PRAGMA foreign_keys=ON")
        # The transaction Alembic goes on with (and commits, with this revision's version row).
        raw.execute("BEGIN IMMEDIATE")


def _rebuild(raw: Any, before: int, after: int) -> None:
    (create,) = raw.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (_TABLE,)
    ).fetchone()
    column = re.compile(rf"^(\s*)kind VARCHAR\({before}\) NOT NULL,", re.MULTILINE)
    if re.search(rf"^\s*kind VARCHAR\({after}\) NOT NULL,", create, re.MULTILINE):
        return  # already so (an upgrade cut off after this rebuild committed)
    others = [
        sql
        for (sql,) in raw.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') "
            "AND sql IS NOT NULL",
            (_TABLE,),
        )
    ]
    body, changed = column.subn(rf"\1kind VARCHAR({after}) NOT NULL,", create[create.index("(") :])
    if changed != 1:
        raise RuntimeError(f"{_TABLE}: unexpected CREATE TABLE text: {create}")
    # The highest id ever handed out (revision 0015): dropping the table forgets it, and the
    # copy only knows the highest id left, which a deleted newest item's was above.
    seq = raw.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (_TABLE,)).fetchone()
    new = f"{_TABLE}_rebuilt"
    columns = ", ".join(f'"{r[1]}"' for r in raw.execute(f'PRAGMA table_info("{_TABLE}")'))
    raw.execute(f'CREATE TABLE "{new}" {body}')
    # With explicit ids an AUTOINCREMENT table records the highest in sqlite_sequence itself.
    raw.execute(f'INSERT INTO "{new}" ({columns}) SELECT {columns} FROM "{_TABLE}"')
    raw.execute(f'DROP TABLE "{_TABLE}"')
    raw.execute(f'ALTER TABLE "{new}" RENAME TO "{_TABLE}"')
    for sql in others:
        raw.execute(sql)
    if seq is not None:
        raw.execute("DELETE FROM sqlite_sequence WHERE name = ?", (_TABLE,))
        raw.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (_TABLE, seq[0]))
