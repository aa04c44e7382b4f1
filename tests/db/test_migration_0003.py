"""Revision 0003 (idempotency keys) upgrades a 0002 database holding records in every stage and
finds them intact, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select, update

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, idempotency_keys, media_objects
from tests.support.old_database import MEDIA_STAGES, assert_kept, fill_for_alice, read_kept


def test_0003_upgrade_keeps_records_in_every_stage(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        # The halted record still holds the claim it was halted under; every item its original.
        conn.execute(update(audio_records).where(audio_records.c.id == 6).values(claim_token="t"))
        conn.execute(
            insert(media_objects),
            [{"item_id": n, "role": "original", "file_id": 1} for n in range(1, 4)],
        )
        before = read_kept(conn, media_objects)
    assert len(before.media) == len(MEDIA_STAGES)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0003"
    assert_kept(old_engine, before)
    with old_engine.begin() as conn:
        # The new table works with what was there: a key naming an old record.
        conn.execute(
            insert(idempotency_keys).values(
                owner="alice", scope="records", key="k", record_id=1, created_at=3.0
            )
        )
        assert conn.execute(select(idempotency_keys.c.record_id)).scalar_one() == 1
