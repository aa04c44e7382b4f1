"""Run the Alembic migrations shipped inside the package (D15: one schema step)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect

__all__ = [
    "alembic_config",
    "current_revision",
    "head_revision",
    "known_revision",
    "oldest_code",
    "upgrade",
]

_MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(engine: Engine) -> Config:
    """An Alembic :class:`Config` bound to ``engine`` (no ``alembic.ini`` needed)."""
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema of ``engine``'s database to ``revision`` (default: the newest).

    Safe to call on every start: an up-to-date database is left as it is.
    """
    command.upgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for a database never migrated."""
    if not inspect(engine).has_table("alembic_version"):
        return None
    with engine.connect() as conn:
        row = conn.exec_driver_sql("SELECT version_num FROM alembic_version").first()
    return None if row is None else str(row[0])


def oldest_code(engine: Engine) -> str | None:
    """The oldest code revision the database's schema says it still works with
    (``schema_compat``, revision 0008 on); None for a schema that does not say."""
    if not inspect(engine).has_table("schema_compat"):
        return None
    with engine.connect() as conn:
        row = conn.exec_driver_sql("SELECT oldest_code FROM schema_compat WHERE id = 1").first()
    return None if row is None else str(row[0])


def _scripts() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return ScriptDirectory.from_config(config)


def head_revision() -> str:
    """The newest revision this version of Conveyor ships."""
    head = _scripts().get_current_head()
    assert head is not None, "the package ships at least one migration"
    return head


def known_revision(revision: str) -> bool:
    """True when ``revision`` is one this version ships (False: the database is newer)."""
    return revision in {script.revision for script in _scripts().walk_revisions()}
