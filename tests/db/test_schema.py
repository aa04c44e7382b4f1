"""The schema is one migration (D15) and equals ``tables.py`` on both databases."""

from __future__ import annotations

import re
from enum import StrEnum
from itertools import pairwise

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Engine, String, inspect

from conveyor.db.migrate import alembic_config, current_revision, upgrade
from conveyor.db.tables import media_items, media_objects, metadata, texts
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
        diff = compare_metadata(context, metadata)
    assert diff == []


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
