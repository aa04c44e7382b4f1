"""Revision 0013 (every claim names its holder: ``claimed_by``, ``worker_processes.holder``)
upgrades a database made by 0012 with records in every stage; it only adds nullable columns."""

from __future__ import annotations

from sqlalchemy import Engine, select

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import audio_records, media_items
from tests.support.old_database import assert_kept, fill_for_alice


def test_0013_keeps_every_record_and_adds_the_holder(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        before = fill_for_alice(conn)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0013"
    assert oldest_code(old_engine) == "0006", "it only adds: older code still works"
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        for table in (audio_records, media_items):
            holders = conn.execute(select(table.c.claimed_by).order_by(table.c.id)).scalars()
            assert list(holders) == [None] * len(before.rows[table.name])
