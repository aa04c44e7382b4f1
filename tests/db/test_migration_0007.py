"""Revision 0007 (worker processes, lane pauses) upgrades a database made by 0006 with records in
every stage; it only adds tables, so what an older worker reads and writes is unchanged."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import audio_records, lane_pauses, media_items, users, worker_processes
from tests.support.old_database import AUDIO_ADDED, AUDIO_STAGES, MEDIA_ADDED, fill_every_stage

# The columns the older revision knows (0011 adds `step_started_at` to both record tables).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in AUDIO_ADDED]
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def test_0007_keeps_every_record_and_adds_processes_and_pauses(old_engine: Engine) -> None:
    now = 1_800_000_000.0
    with old_engine.begin() as conn:
        conn.execute(insert(users).values(id=1, name="alice", created_at=now))
        fill_every_stage(conn, now, owner="alice")
    with old_engine.connect() as conn:
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0007"
    with old_engine.connect() as conn:
        after_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        assert after_audio == before_audio
        assert [r.stage for r in after_audio] == [*AUDIO_STAGES, "submitted"]
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == before_media
        assert conn.execute(select(worker_processes)).all() == []
        assert conn.execute(select(lane_pauses)).all() == []
    with old_engine.begin() as conn:
        conn.execute(insert(lane_pauses).values(lane="audio", paused_at=now, reason=None))
        conn.execute(
            insert(worker_processes).values(
                host="h",
                pid=1,
                version="x",
                lanes={"audio": 2},
                busy={"audio": 0},
                holding=[["audio", 1, "t"]],
                started_at=now,
                last_seen_at=now,
                state="running",
            )
        )
        held = conn.execute(select(worker_processes.c.holding)).scalar_one()
    assert held == [["audio", 1, "t"]]
