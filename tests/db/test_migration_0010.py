"""Revision 0010 (an index on ``files.sha256``) upgrades a database made by 0009 with records
in every stage, and intake then finds content an owner already holds in it."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, select, update

from conveyor.audio import queries as audio_queries
from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, files, media_items, texts, users
from conveyor.media import queries as media_queries
from tests.support.old_database import (
    AUDIO_ADDED,
    AUDIO_STAGES,
    MEDIA_ADDED,
    MEDIA_STAGES,
    fill_every_stage,
)

# The columns the older revision knows (0011 adds `step_started_at` to both record tables).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in AUDIO_ADDED]
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def test_0010_keeps_every_record_and_indexes_content_hashes(old_engine: Engine) -> None:
    now = 1_800_000_000.0
    with old_engine.begin() as conn:
        conn.execute(users.insert().values(id=1, name="alice", created_at=now))
        fill_every_stage(conn, now, owner="alice")
        conn.execute(update(files).where(files.c.id == 1).values(sha256="ab" * 32))
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
        before_files = conn.execute(select(files).order_by(files.c.id)).all()
    upgrade(old_engine)
    assert current_revision(old_engine) == "0010" or (current_revision(old_engine) or "") > "0010"
    indexes = {ix["name"] for ix in inspect(old_engine).get_indexes("files")}
    assert "ix_files_sha256" in indexes
    with old_engine.connect() as conn:
        assert conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all() == (
            before_audio
        )
        stages = conn.execute(select(audio_records.c.stage).order_by(audio_records.c.id))
        assert list(stages.scalars()) == [*AUDIO_STAGES, "submitted"]
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == before_media
        assert [r.stage for r in before_media] == MEDIA_STAGES
        assert conn.execute(select(files).order_by(files.c.id)).all() == before_files
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
        # Every record of the old database shares file 1: the oldest is the one that holds it.
        assert audio_queries.record_with_content(conn, "alice", "ab" * 32) == 1
        assert audio_queries.record_with_content(conn, "bob", "ab" * 32) is None
        assert media_queries.item_with_content(conn, "alice", "cd" * 32) is None
