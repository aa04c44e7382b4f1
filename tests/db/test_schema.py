"""The schema is one migration (D15) and equals ``tables.py`` on both databases."""

from __future__ import annotations

import re
import subprocess
import sys
from enum import StrEnum
from itertools import pairwise
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Engine, String, inspect, text

from conveyor.db.engine import make_engine
from conveyor.db.migrate import alembic_config, current_revision, upgrade
from conveyor.db.tables import media_items, media_objects, metadata, postgresql_options, texts
from conveyor.kinds import MediaKind, Role, TextKind


def head(engine: Engine) -> str:
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    assert head is not None
    return head


def test_d15_one_schema_step(engine: Engine) -> None:
    """One migration creates the schema; every later change is one revision on a single line."""
    script = ScriptDirectory.from_config(alembic_config(engine))
    revisions = list(script.walk_revisions())
    assert revisions[-1].revision == "0001" and revisions[-1].down_revision is None
    for newer, older in pairwise(revisions):
        assert newer.down_revision == older.revision
    assert current_revision(engine) == head(engine)


def test_migrated_schema_equals_tables(engine: Engine) -> None:
    def ours(_obj: object, name: str | None, type_: str, *_a: object) -> bool:
        # Engine tests add tables of their own (test_jobs); they are not the schema. SQLite's
        # FTS5 index of search_texts (a virtual table and its shadow tables, made by the
        # migration) has no place in the metadata, and its GIN index is PostgreSQL's only.
        if type_ == "index" and name == "ix_search_texts_tsv":
            return engine.dialect.name == "postgresql"
        if type_ != "table" or name is None:
            return True
        return not name.startswith(("test_", "search_texts_fts"))

    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": ours})
        target = postgresql_options() if engine.dialect.name == "postgresql" else metadata
        diff = compare_metadata(context, target)
    assert diff == []


def _index_definitions(engine: Engine, schema: str) -> dict[str, str]:
    """Each index of ``schema`` (PostgreSQL) or of the file (SQLite) by name: PostgreSQL's own
    normalised definition, SQLite's ``WHERE`` clause if any (it keeps the DDL as written)."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            rows = conn.execute(
                text("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = :schema"),
                {"schema": schema},
            )
            return {name: str(sql).replace(f"{schema}.", "") for name, sql in rows}
        rows = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'index'"))
        return {
            name: "WHERE" if " WHERE " in str(sql).upper() else ""
            for name, sql in rows
            if sql is not None
        }


def test_create_all_makes_the_indexes_the_migrations_make(engine: Engine, tmp_path: Path) -> None:
    """``metadata.create_all`` makes every index as the migrations do (the partial indexes with
    their WHERE, the full-text index with GIN on PostgreSQL), though the tables attach their
    PostgreSQL options only as a schema is made, not at import."""
    ours = {i.name for t in metadata.tables.values() for i in t.indexes if i.name is not None}
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS created_all CASCADE"))
            conn.execute(text("CREATE SCHEMA created_all"))
        try:
            metadata.create_all(
                engine.execution_options(schema_translate_map={None: "created_all"})
            )
            made = _index_definitions(engine, "created_all")
        finally:
            with engine.begin() as conn:
                conn.execute(text("DROP SCHEMA created_all CASCADE"))
        migrated = _index_definitions(engine, "public")
    else:
        fresh = make_engine(f"sqlite:///{tmp_path / 'created.db'}")
        metadata.create_all(fresh)
        made = _index_definitions(fresh, "")
        fresh.dispose()
        migrated = _index_definitions(engine, "")
    assert {n: made[n] for n in ours if n in made} == {n: migrated[n] for n in ours if n in made}
    partial = {n for n, sql in made.items() if "WHERE" in sql}
    assert {"ix_audio_records_claim", "ix_media_items_started"} <= partial
    if engine.dialect.name == "postgresql":
        assert "USING gin" in made["ix_search_texts_tsv"]


def test_create_all_on_postgresql_in_a_fresh_process_attaches_the_options() -> None:
    """In a process where nothing attached the tables' PostgreSQL options yet (no migration,
    no :func:`postgresql_options`), ``create_all`` for PostgreSQL still emits each partial
    index's WHERE and the GIN method: the metadata attaches them as a schema is made."""
    code = (
        "from sqlalchemy import create_mock_engine\n"
        "from conveyor.db.tables import metadata\n"
        "made = []\n"
        "engine = create_mock_engine('postgresql://', lambda sql, *a, **k: made.append(\n"
        "    str(sql.compile(dialect=engine.dialect)).strip()))\n"
        "metadata.create_all(engine, checkfirst=False)\n"
        "print('\\n'.join(' '.join(s.split()) for s in made if s.startswith('CREATE INDEX')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    made = {line.split()[2]: line for line in out.splitlines()}
    for table in ("audio_records", "media_items"):
        for name in ("claim", "begun", "started"):
            assert " WHERE " in made[f"ix_{table}_{name}"], made[f"ix_{table}_{name}"]
    assert "USING gin" in made["ix_search_texts_tsv"]
    assert " WHERE " not in made["ix_audio_records_owner"]


def test_upgrade_is_idempotent(engine: Engine) -> None:
    upgrade(engine)
    upgrade(engine)
    assert current_revision(engine) == head(engine)


@pytest.mark.parametrize(
    ("table", "name", "words"),
    [
        ("media_items", "ck_media_items_kind", MediaKind),
        ("media_objects", "ck_media_objects_role", Role),
        ("texts", "ck_texts_kind", TextKind),
    ],
)
def test_the_migrated_kind_checks_name_exactly_the_enums_words(
    engine: Engine, table: str, name: str, words: type[StrEnum]
) -> None:
    """The revisions spell the words of their time; tables.py generates the same CHECK from
    the enum (``conveyor.kinds``): a member added without a revision fails here."""
    checks = {c["name"]: c["sqltext"] for c in inspect(engine).get_check_constraints(table)}
    assert name in checks, f"{table} has no CHECK {name}"
    assert set(re.findall(r"'([a-z_]+)'", str(checks[name]))) == {m.value for m in words}


@pytest.mark.parametrize(
    ("column", "words"),
    [(media_items.c.kind, MediaKind), (media_objects.c.role, Role), (texts.c.kind, TextKind)],
)
def test_every_kind_and_role_fits_its_column(column: Column[str], words: type[StrEnum]) -> None:
    """A member whose word is longer than its column is refused by PostgreSQL before the CHECK
    is asked (``media_items.kind`` was VARCHAR(8) until revision 0018): widen the column in
    the member's revision."""
    assert isinstance(column.type, String) and column.type.length is not None
    too_long = [m.value for m in words if len(m.value) > column.type.length]
    assert not too_long, f"{column} is VARCHAR({column.type.length}): {too_long} do not fit"
