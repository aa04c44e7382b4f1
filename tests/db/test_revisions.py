"""The revisions read from the migration files' names are Alembic's own chain, so that the
schema check of every command can skip loading Alembic (a fast start, issue 23)."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory

from conveyor.db import migrate


def test_shipped_revisions_are_alembics_chain_in_order() -> None:
    config = Config()
    config.set_main_option("script_location", str(migrate._MIGRATIONS))
    scripts = ScriptDirectory.from_config(config)
    chain = [script.revision for script in scripts.walk_revisions()][::-1]
    assert list(migrate.shipped_revisions()) == chain
    assert migrate.head_revision() == scripts.get_current_head()
    assert not migrate.known_revision("9999")
