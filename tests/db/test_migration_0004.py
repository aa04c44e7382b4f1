"""Revision 0004 (web sign-in) upgrades a database made by 0003 with records in every stage."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import (
    api_tokens,
    audio_records,
    media_items,
    texts,
    users,
    web_sessions,
)
from tests.support.old_database import AUDIO_ADDED, AUDIO_STAGES, MEDIA_ADDED, fill_every_stage

# The columns this revision knows (0005 added `channels`).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in {"channels", *AUDIO_ADDED}]
# (0011 adds `step_started_at` to both record tables.)
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def _fill(engine: Engine) -> None:
    now = 1_800_000_000.0
    with engine.begin() as conn:
        conn.execute(insert(users).values(id=1, name="alice", created_at=now))
        conn.execute(
            insert(api_tokens).values(user_id=1, token_hash="a" * 64, label="cli", created_at=now)
        )
        fill_every_stage(conn, now, owner="alice")


def test_0004_keeps_every_record_and_adds_sign_in(old_engine: Engine) -> None:
    _fill(old_engine)
    with old_engine.connect() as conn:
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (revision := current_revision(old_engine)) is not None and revision >= "0004"
    with old_engine.connect() as conn:
        assert (
            conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all() == before_audio
        )
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == before_media
        assert [r.stage for r in before_audio] == [*AUDIO_STAGES, "submitted"]
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
        user = conn.execute(select(users)).mappings().one()
        assert user["name"] == "alice" and user["password_hash"] is None
        assert user["is_admin"] is False and user["failed_sign_ins"] == 0
        assert conn.execute(select(api_tokens.c.label)).scalar_one() == "cli"
        assert conn.execute(select(web_sessions)).all() == []
