"""Revision 0008 (schema_compat) upgrades a database made by 0007 with records in every stage
and says the schema still works with code from revision 0006 on (it only adds)."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import audio_records, media_items, users
from tests.support.old_database import AUDIO_ADDED, AUDIO_STAGES, MEDIA_ADDED, fill_every_stage

# The columns the older revision knows (0011 adds `step_started_at` to both record tables).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in AUDIO_ADDED]
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def test_0008_keeps_every_record_and_says_which_code_still_works(old_engine: Engine) -> None:
    now = 1_800_000_000.0
    with old_engine.begin() as conn:
        conn.execute(insert(users).values(id=1, name="alice", created_at=now))
        fill_every_stage(conn, now, owner="alice")
    with old_engine.connect() as conn:
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    assert oldest_code(old_engine) is None
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0008"
    assert oldest_code(old_engine) == "0006"
    with old_engine.connect() as conn:
        after = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        assert after == before_audio
        assert [r.stage for r in after] == [*AUDIO_STAGES, "submitted"]
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == before_media
