"""Revision 0008 (schema_compat) upgrades a database made by 0007 with records in every stage
and says the schema still works with code from revision 0006 on (it only adds)."""

from __future__ import annotations

from sqlalchemy import Engine

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from tests.support.old_database import assert_kept, fill_for_alice


def test_0008_keeps_every_record_and_says_which_code_still_works(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        before = fill_for_alice(conn)
    assert oldest_code(old_engine) is None
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0008"
    assert oldest_code(old_engine) == "0006"
    assert_kept(old_engine, before)
