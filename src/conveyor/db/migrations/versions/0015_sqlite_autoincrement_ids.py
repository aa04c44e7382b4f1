"""record, item and album ids never reused on SQLite: AUTOINCREMENT on their tables

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 20:27:00

Without ``AUTOINCREMENT`` SQLite hands out max(id) + 1, so deleting the newest recording (item,
album) gave its id to the next upload, and saved links and ``Location`` headers pointed at
another one. With it, SQLite keeps the highest id ever used (``sqlite_sequence``) and never
hands it out again. PostgreSQL's sequences never reuse an id: there this revision does nothing.

SQLite cannot add ``AUTOINCREMENT`` to a table, so each of ``albums``, ``audio_records`` and
``media_items`` is rebuilt by SQLite's own procedure (sqlite.org/lang_altertable.html, "making
other kinds of table schema changes"): with foreign keys off, a new table from the stored
``CREATE TABLE`` text with only the id column changed, every row copied, the old table dropped,
the new one renamed, its indexes made again from their stored text, and ``PRAGMA
foreign_key_check`` before the commit. Foreign keys must be off (which SQLite allows only
between transactions): dropping a parent table with them on would first delete every row
that cascades from it (transcripts, items, album events). Rows, ids, every constraint and the
partial claim indexes stay as they were. The schema only gains a keyword, so code from 0006 on
still works with it (``schema_compat`` is left as it is).
"""

import re
from collections.abc import Sequence
from typing import Any

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("albums", "audio_records", "media_items")

# The id column and the table's named primary key, as SQLAlchemy writes them (0001).
_ID_COLUMN = re.compile(r"^(\s*)id INTEGER NOT NULL,", re.MULTILINE)
# With the comma before it: 0001 wrote it first among the constraints, a downgrade last.
_NAMED_KEY = re.compile(r",\s*CONSTRAINT pk_\w+ PRIMARY KEY \(id\)(?=,|\s*\)\s*$)")
_AUTOINCREMENT = "id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_with_foreign_keys_off(autoincrement=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_with_foreign_keys_off(autoincrement=False)


def _rebuild_with_foreign_keys_off(*, autoincrement: bool) -> None:
    # The driver's own connection: the engine leaves transactions to us (BEGIN IMMEDIATE) and
    # the PRAGMA must run between two of them. What earlier revisions of this upgrade did is
    # committed first, with their version row; this revision's own commits last, with its row.
    raw: Any = op.get_bind().connection.dbapi_connection
    if raw.in_transaction:
        raw.execute("COMMIT")
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        raw.execute("BEGIN IMMEDIATE")
        for table in TABLES:
            _rebuild(raw, table, autoincrement=autoincrement)
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


def _rebuild(raw: Any, table: str, *, autoincrement: bool) -> None:
    (create,) = raw.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    if ("AUTOINCREMENT" in create) == autoincrement:
        return  # already so (an upgrade cut off after this rebuild committed)
    others = [
        sql
        for (sql,) in raw.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') "
            "AND sql IS NOT NULL",
            (table,),
        )
    ]
    new = f"{table}_rebuilt"
    body = create[create.index("(") :]
    if autoincrement:
        body, ids = _ID_COLUMN.subn(rf"\1{_AUTOINCREMENT}", body)
        body, keys = _NAMED_KEY.subn("", body)
    else:
        body, ids = re.subn(re.escape(_AUTOINCREMENT), "id INTEGER NOT NULL,", body)
        body, keys = re.subn(r"\n\)\s*$", f", \n\tCONSTRAINT pk_{table} PRIMARY KEY (id)\n)", body)
    if (ids, keys) != (1, 1):
        raise RuntimeError(f"{table}: unexpected CREATE TABLE text: {create}")
    columns = ", ".join(f'"{r[1]}"' for r in raw.execute(f'PRAGMA table_info("{table}")'))
    raw.execute(f'CREATE TABLE "{new}" {body}')
    # With explicit ids an AUTOINCREMENT table records the highest in sqlite_sequence itself.
    raw.execute(f'INSERT INTO "{new}" ({columns}) SELECT {columns} FROM "{table}"')
    raw.execute(f'DROP TABLE "{table}"')
    raw.execute(f'ALTER TABLE "{new}" RENAME TO "{table}"')
    for sql in others:
        raw.execute(sql)
