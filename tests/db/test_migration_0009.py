"""Revision 0009 (search_texts, with SQLite's FTS5 index or PostgreSQL's GIN index) upgrades a
database made by 0008 with records in every stage, and what was there is found at once."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.audio.search import search_records
from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, media_items, users
from tests.support.old_database import AUDIO_ADDED, AUDIO_STAGES, MEDIA_ADDED, fill_every_stage

# The columns the older revision knows (0011 adds `step_started_at` to both record tables).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in AUDIO_ADDED]
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def test_0009_keeps_every_record_and_indexes_their_titles_and_texts(old_engine: Engine) -> None:
    now = 1_800_000_000.0
    with old_engine.begin() as conn:
        conn.execute(insert(users).values(id=1, name="alice", created_at=now))
        fill_every_stage(conn, now, owner="alice")
    with old_engine.connect() as conn:
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0009"
    with old_engine.connect() as conn:
        after_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        assert after_audio == before_audio
        assert [r.stage for r in after_audio] == [*AUDIO_STAGES, "submitted"]
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == before_media
    # Record 5's transcript and every title were there before: search finds them now.
    hello = search_records(old_engine, "alice", "hello")
    assert [(h.record_id, h.kind) for h in hello] == [(5, "transcript")]
    assert [(h.record_id, h.kind) for h in search_records(old_engine, "alice", "t3")] == [
        (3, "title")
    ]
    assert search_records(old_engine, "bob", "hello") == []
