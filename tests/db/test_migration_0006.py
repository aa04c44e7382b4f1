"""Revision 0006 (owner vocabulary, a record's channel choice) upgrades a database made by 0005
with records in every stage."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import (
    audio_records,
    media_items,
    owner_vocabulary,
    texts,
    users,
)
from tests.support.old_database import AUDIO_ADDED, AUDIO_STAGES, MEDIA_ADDED, fill_every_stage

# The columns revision 0005 knows (0006 adds `channels`).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in {"channels", *AUDIO_ADDED}]
# (0011 adds `step_started_at` to both record tables.)
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def _fill(engine: Engine) -> None:
    now = 1_800_000_000.0
    with engine.begin() as conn:
        conn.execute(insert(users).values(id=1, name="alice", created_at=now))
        fill_every_stage(conn, now, owner="alice")


def test_0006_keeps_every_record_and_adds_vocabulary_and_channels(old_engine: Engine) -> None:
    _fill(old_engine)
    with old_engine.connect() as conn:
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (revision := current_revision(old_engine)) is not None and revision >= "0006"
    with old_engine.connect() as conn:
        after = conn.execute(select(audio_records).order_by(audio_records.c.id)).mappings().all()
        # Every record kept as it was, in its stage (the halted one still halted); the new
        # column is NULL: those records follow [transcription] channels.
        assert [tuple(row[k] for k in before_audio[0]._fields) for row in after] == [
            tuple(row) for row in before_audio
        ]
        assert [r["stage"] for r in after] == [*AUDIO_STAGES, "submitted"]
        assert [r["channels"] for r in after] == [None] * 6
        assert after[5]["halt_reason"] == "stuck"
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == before_media
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
        assert conn.execute(select(users.c.name)).scalar_one() == "alice"
        assert conn.execute(select(owner_vocabulary)).all() == []
    with old_engine.begin() as conn:
        conn.execute(
            insert(owner_vocabulary).values(owner="alice", hints="Kubernetes", updated_at=1.0)
        )
