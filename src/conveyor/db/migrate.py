"""Run the Alembic migrations shipped inside the package (D15: one schema step).

Which revisions ship is read from the file names (``versions/NNNN_what.py`` holds revision
``NNNN``; a test holds the names to Alembic's own chain), so that every command can check the
schema without loading Alembic; it is imported only to upgrade.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "alembic_config",
    "current_revision",
    "head_revision",
    "known_revision",
    "oldest_code",
    "shipped_revisions",
    "upgrade",
]

_MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(engine: Engine) -> Config:
    """An Alembic :class:`Config` bound to ``engine`` (no ``alembic.ini`` needed)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema of ``engine``'s database to ``revision`` (default: the newest).

    Safe to call on every start: an up-to-date database is left as it is.
    """
    from alembic import command

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


_REVISION_FILE = re.compile(r"^(\d{4})_\w+\.py$")


@cache
def shipped_revisions() -> tuple[str, ...]:
    """Every revision this version of Conveyor ships, oldest first (from the file names)."""
    names = (_MIGRATIONS / "versions").iterdir()
    found = sorted(m.group(1) for p in names if (m := _REVISION_FILE.match(p.name)))
    assert found, "the package ships at least one migration"
    return tuple(found)


def head_revision() -> str:
    """The newest revision this version of Conveyor ships."""
    return shipped_revisions()[-1]


def known_revision(revision: str) -> bool:
    """True when ``revision`` is one this version ships (False: the database is newer)."""
    return revision in shipped_revisions()
