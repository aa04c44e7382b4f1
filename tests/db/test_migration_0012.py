"""Revision 0012 (a media item's capture zone and incomplete flag) upgrades a database made by
0011 with records in every stage: every row kept, the zone unknown, nothing flagged."""

from __future__ import annotations

from sqlalchemy import Engine, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, media_items, texts, users
from tests.support.old_database import AUDIO_STAGES, MEDIA_STAGES, fill_every_stage

NEW = {"captured_offset", "incomplete", "claimed_by", "added_by", "content_id"}
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in NEW]
# (0013 adds `claimed_by` to both record tables, 0014 `added_by` and 0017 `content_id` to media
# items.)
AUDIO_COLUMNS = [c for c in audio_records.c if c.name != "claimed_by"]


def test_0012_keeps_every_item_with_the_zone_unknown_and_nothing_flagged(
    old_engine: Engine,
) -> None:
    with old_engine.begin() as conn:
        conn.execute(users.insert().values(id=1, name="alice", created_at=1_800_000_000.0))
        fill_every_stage(conn, 1_800_000_000.0, owner="alice")
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0012"
    with old_engine.connect() as conn:
        assert conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all() == (
            before_audio
        )
        stages = conn.execute(select(audio_records.c.stage).order_by(audio_records.c.id))
        assert list(stages.scalars()) == [*AUDIO_STAGES, "submitted"]
        after = (
            conn.execute(
                select(
                    *MEDIA_COLUMNS, media_items.c.captured_offset, media_items.c.incomplete
                ).order_by(media_items.c.id)
            )
            .mappings()
            .all()
        )
        assert [tuple(r[c.name] for c in MEDIA_COLUMNS) for r in after] == [
            tuple(r) for r in before_media
        ]
        assert [r["stage"] for r in after] == list(MEDIA_STAGES)
        assert [(r["captured_offset"], r["incomplete"]) for r in after] == [(None, False)] * 3
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
