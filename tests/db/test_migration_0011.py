"""Revision 0011 (``step_started_at``, the begun and started indexes) upgrades a database made
by 0010 with records in every stage: nothing of them changes, and their claims, if any, are
claims whose step never started (D18: their lapse counts nothing)."""

from __future__ import annotations

from sqlalchemy import Engine, insert, inspect, select, update

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, media_items, texts, users
from tests.support.old_database import (
    AUDIO_ADDED,
    AUDIO_STAGES,
    MEDIA_ADDED,
    MEDIA_STAGES,
    fill_every_stage,
)

# The columns revision 0010 knows (0011 adds `step_started_at`).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in AUDIO_ADDED]
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def test_0011_keeps_every_record_and_adds_step_started_at(old_engine: Engine) -> None:
    now = 1_800_000_000.0
    with old_engine.begin() as conn:
        conn.execute(insert(users).values(id=1, name="alice", created_at=now))
        fill_every_stage(conn, now, owner="alice")
        # One record under a claim made by the old code.
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == 2)
            .values(claim_token="a" * 32, claim_expires_at=now + 120, work_started_at=now)
        )
    with old_engine.connect() as conn:
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0011"
    with old_engine.connect() as conn:
        assert conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all() == (
            before_audio
        )
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == (
            before_media
        )
        after = conn.execute(select(audio_records).order_by(audio_records.c.id)).mappings().all()
        assert [r["stage"] for r in after] == [*AUDIO_STAGES, "submitted"]
        assert [r["step_started_at"] for r in after] == [None] * 6
        assert after[5]["halt_reason"] == "stuck"
        media = conn.execute(select(media_items).order_by(media_items.c.id)).mappings().all()
        assert [r["stage"] for r in media] == MEDIA_STAGES
        assert [r["step_started_at"] for r in media] == [None] * 3
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
    indexes = {
        table: {i["name"] for i in inspect(old_engine).get_indexes(table)}
        for table in ("audio_records", "media_items")
    }
    for table, names in indexes.items():
        assert {f"ix_{table}_claim", f"ix_{table}_begun", f"ix_{table}_started"} <= names
