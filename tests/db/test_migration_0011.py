"""Revision 0011 (``step_started_at``, the begun and started indexes) upgrades a database made
by 0010 with records in every stage: nothing of them changes, and their claims, if any, are
claims whose step never started (D18: their lapse counts nothing)."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, select, update

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, media_items, texts
from tests.support.old_database import NOW, assert_kept, fill_for_alice, read_kept


def test_0011_keeps_every_record_and_adds_step_started_at(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        # One record under a claim made by the old code.
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == 2)
            .values(claim_token="a" * 32, claim_expires_at=NOW + 120, work_started_at=NOW)
        )
        before = read_kept(conn)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0011"
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        after = conn.execute(select(audio_records).order_by(audio_records.c.id)).mappings().all()
        assert [r["step_started_at"] for r in after] == [None] * 6
        assert after[5]["halt_reason"] == "stuck"
        media = conn.execute(select(media_items).order_by(media_items.c.id)).mappings().all()
        assert [r["step_started_at"] for r in media] == [None] * 3
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
    indexes = {
        table: {i["name"] for i in inspect(old_engine).get_indexes(table)}
        for table in ("audio_records", "media_items")
    }
    for table, names in indexes.items():
        assert {f"ix_{table}_claim", f"ix_{table}_begun", f"ix_{table}_started"} <= names
