"""Revision 0006 (owner vocabulary, a record's channel choice) upgrades a database made by 0005
with records in every stage."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, owner_vocabulary, texts, users
from tests.support.old_database import assert_kept, fill_for_alice


def test_0006_keeps_every_record_and_adds_vocabulary_and_channels(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        before = fill_for_alice(conn, texts)
    upgrade(old_engine)
    assert (revision := current_revision(old_engine)) is not None and revision >= "0006"
    # Every record kept as it was, in its stage (the halted one still halted).
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        after = conn.execute(select(audio_records).order_by(audio_records.c.id)).mappings().all()
        # The new column is NULL: those records follow [transcription] channels.
        assert [r["channels"] for r in after] == [None] * 6
        assert after[5]["halt_reason"] == "stuck"
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
        assert conn.execute(select(users.c.name)).scalar_one() == "alice"
        assert conn.execute(select(owner_vocabulary)).all() == []
    with old_engine.begin() as conn:
        conn.execute(
            insert(owner_vocabulary).values(owner="alice", hints="Kubernetes", updated_at=1.0)
        )
