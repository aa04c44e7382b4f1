"""The schema is one migration (D15) and equals ``tables.py`` on both databases."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from conveyor.db.migrate import alembic_config, current_revision, upgrade
from conveyor.db.tables import metadata


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


def test_sql_lives_only_in_db_and_queries_modules() -> None:
    """Statement apart from policy: SQL builders only in ``db/`` and ``*/queries.py``."""
    root = Path(__file__).resolve().parents[2] / "src" / "conveyor"
    markers = ("insert(", "update(", "delete(", "select(", "text(", "exec_driver_sql(")
    offenders = []
    scanned = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] == "db" or rel.name == "queries.py":
            continue
        scanned.append(str(rel))
        source = path.read_text()
        for marker in markers:
            if f" {marker}" in source or f"({marker}" in source or f"\n{marker}" in source:
                imported = "from sqlalchemy import" in source or "sqlalchemy" in source
                if imported:
                    offenders.append(f"{rel}: {marker}")
    assert offenders == []
    # The scan read the policy modules, where SQL would most likely creep in.
    assert {"pipeline/lifecycle.py", "pipeline/executor.py", "api/app.py"} <= set(scanned)
