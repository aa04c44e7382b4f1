"""The schema is one migration (D15) and equals ``tables.py`` on both databases."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from conveyor.db.migrate import alembic_config, current_revision, upgrade
from conveyor.db.tables import metadata


def test_d15_one_schema_step(engine: Engine) -> None:
    script = ScriptDirectory.from_config(alembic_config(engine))
    revisions = list(script.walk_revisions())
    assert [r.revision for r in revisions] == ["0001"]
    assert current_revision(engine) == "0001"


def test_migrated_schema_equals_tables(engine: Engine) -> None:
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_upgrade_is_idempotent(engine: Engine) -> None:
    upgrade(engine)
    upgrade(engine)
    assert current_revision(engine) == "0001"


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
