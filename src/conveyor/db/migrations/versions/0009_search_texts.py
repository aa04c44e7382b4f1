"""search: search_texts (title, brief, transcript, correction per record), with an FTS5
index on SQLite and a GIN tsvector index on PostgreSQL, filled from what is there

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 16:00:00

Only adds a table (and, on SQLite, the FTS5 table and the triggers that keep it in step), so
``schema_compat.oldest_code`` stays as it is: a process of the previous release keeps working
on the upgraded schema, but what it writes meanwhile is not found by search until the
record's texts are written again.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

from conveyor.audio.search.dictionaries import DICTIONARIES, SIMPLE

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The SQLite recipe for an external-content FTS5 table (sqlite.org/fts5.html, 4.4.3).
_SQLITE = [
    "CREATE VIRTUAL TABLE search_texts_fts USING fts5(body, content='search_texts', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER search_texts_ai AFTER INSERT ON search_texts BEGIN "
    "INSERT INTO search_texts_fts(rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER search_texts_ad AFTER DELETE ON search_texts BEGIN "
    "INSERT INTO search_texts_fts(search_texts_fts, rowid, body) "
    "VALUES ('delete', old.id, old.body); END",
    "CREATE TRIGGER search_texts_au AFTER UPDATE ON search_texts BEGIN "
    "INSERT INTO search_texts_fts(search_texts_fts, rowid, body) "
    "VALUES ('delete', old.id, old.body); "
    "INSERT INTO search_texts_fts(rowid, body) VALUES (new.id, new.body); END",
]


def _config_case(language: str) -> str:
    whens = " ".join(f"WHEN '{code}' THEN '{name}'" for code, name in DICTIONARIES.items())
    return f"CASE lower(substr(coalesce({language}, ''), 1, 2)) {whens} ELSE '{SIMPLE}' END"


def upgrade() -> None:
    op.create_table(
        "search_texts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("record_id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("config", sa.String(length=32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("tsv", TSVECTOR().with_variant(sa.Text(), "sqlite"), nullable=True),
        sa.ForeignKeyConstraint(
            ["record_id"],
            ["audio_records.id"],
            name=op.f("fk_search_texts_record_id_audio_records"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_texts")),
        sa.UniqueConstraint("record_id", "kind", name=op.f("uq_search_texts_record_id_kind")),
    )
    op.create_index("ix_search_texts_owner", "search_texts", ["owner", "config"])
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in _SQLITE:
            op.execute(statement)
    else:
        op.create_index("ix_search_texts_tsv", "search_texts", ["tsv"], postgresql_using="gin")
    language = "coalesce(r.language, r.detected_language)"
    config = _config_case(language)
    for kind in ("title", "brief"):
        op.execute(
            f"INSERT INTO search_texts (record_id, owner, kind, config, body) "
            f"SELECT r.id, r.owner, '{kind}', {config}, r.{kind} FROM audio_records r "
            f"WHERE r.{kind} IS NOT NULL AND r.{kind} <> ''"
        )
    text_config = _config_case(f"coalesce(t.language, {language})")
    op.execute(
        "INSERT INTO search_texts (record_id, owner, kind, config, body) "
        f"SELECT r.id, r.owner, t.kind, {text_config}, t.body FROM texts t "
        "JOIN audio_records r ON r.id = t.record_id "
        "WHERE t.kind IN ('transcript', 'proofread') AND t.body <> ''"
    )
    if dialect != "sqlite":
        op.execute("UPDATE search_texts SET tsv = to_tsvector(config::regconfig, body)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("search_texts_ai", "search_texts_ad", "search_texts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS search_texts_fts")
    op.drop_table("search_texts")
