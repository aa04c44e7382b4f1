"""Revision 0013 (every claim names its holder: ``claimed_by``, ``worker_processes.holder``)
upgrades a database made by 0012 with records in every stage; it only adds nullable columns."""

from __future__ import annotations

from sqlalchemy import Engine, select

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import audio_records, media_items, users
from tests.support.old_database import AUDIO_STAGES, MEDIA_STAGES, fill_every_stage

AUDIO_COLUMNS = [c for c in audio_records.c if c.name != "claimed_by"]
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in {"claimed_by", "added_by", "content_id"}]


def test_0013_keeps_every_record_and_adds_the_holder(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        conn.execute(users.insert().values(id=1, name="alice", created_at=1_800_000_000.0))
        fill_every_stage(conn, 1_800_000_000.0, owner="alice")
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0013"
    assert oldest_code(old_engine) == "0006", "it only adds: older code still works"
    with old_engine.connect() as conn:
        after = conn.execute(select(audio_records).order_by(audio_records.c.id)).mappings().all()
        assert [tuple(r[c.name] for c in AUDIO_COLUMNS) for r in after] == [
            tuple(r) for r in before_audio
        ]
        assert [r["stage"] for r in after] == [*AUDIO_STAGES, "submitted"]
        assert [r["claimed_by"] for r in after] == [None] * 6
        media = (
            conn.execute(
                select(*MEDIA_COLUMNS, media_items.c.claimed_by).order_by(media_items.c.id)
            )
            .mappings()
            .all()
        )
        assert [tuple(r[c.name] for c in MEDIA_COLUMNS) for r in media] == [
            tuple(r) for r in before_media
        ]
        assert [r["stage"] for r in media] == list(MEDIA_STAGES)
