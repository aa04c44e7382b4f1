"""Revision 0016 (``texts.kind`` CHECK) upgrades a database made by 0015 with records in every
stage and a text of every kind: every row is kept, and a kind outside ``TextKind`` is refused."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import audio_records, media_items, texts, users
from conveyor.kinds import TextKind
from tests.support.old_database import AUDIO_STAGES, MEDIA_STAGES, fill_every_stage

NOW = 1_800_000_000.0
# (0017 adds `content_id` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name != "content_id"]


def test_0016_keeps_every_text_and_refuses_an_unknown_kind(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        conn.execute(users.insert().values(id=1, name="alice", created_at=NOW))
        fill_every_stage(conn, NOW, owner="alice")
        for kind in (TextKind.PROOFREAD, TextKind.HINTS):
            conn.execute(insert(texts).values(record_id=5, kind=kind, body=kind, created_at=NOW))
        before = conn.execute(select(texts).order_by(texts.c.id)).all()
        records = conn.execute(select(audio_records).order_by(audio_records.c.id)).all()
        items = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0016"
    assert oldest_code(old_engine) == "0006", "no row changes: older code still works"
    with old_engine.connect() as conn:
        assert conn.execute(select(texts).order_by(texts.c.id)).all() == before
        assert [r.kind for r in before] == ["transcript", "proofread", "hints"]
        after = conn.execute(select(audio_records).order_by(audio_records.c.id)).all()
        assert after == records
        assert [r.stage for r in after] == [*AUDIO_STAGES, "submitted"]
        media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
        assert media == items and [r.stage for r in media] == MEDIA_STAGES
    with pytest.raises(IntegrityError), old_engine.begin() as conn:
        conn.execute(insert(texts).values(record_id=4, kind="summary", body="x", created_at=NOW))
    with old_engine.begin() as conn:  # the record's texts still cascade with it
        conn.execute(audio_records.delete().where(audio_records.c.id == 5))
    with old_engine.connect() as conn:
        assert conn.execute(select(texts)).all() == []
