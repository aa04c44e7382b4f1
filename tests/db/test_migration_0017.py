"""Revision 0017 (motion photos and Live Photos: the ``motion`` and ``motion_original`` roles,
``media_items.content_id``) upgrades a database made by 0016 with records in every stage: every
record and every role row kept, no content identifier yet; the widened CHECK constraint (made
from ``kinds.Role``) takes the new roles and still refuses a word outside it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import audio_records, media_items, media_objects
from conveyor.kinds import Role
from tests.support.old_database import AUDIO_STAGES, MEDIA_STAGES, fill_every_stage

MEDIA_COLUMNS = [c for c in media_items.c if c.name != "content_id"]


def test_0017_keeps_every_record_and_role_and_takes_the_motion_roles(old_engine: Engine) -> None:
    now = 1_800_000_000.0
    with old_engine.begin() as conn:
        fill_every_stage(conn, now, owner="alice")
        items = list(conn.execute(select(media_items.c.id).order_by(media_items.c.id)).scalars())
        conn.execute(
            insert(media_objects),
            [
                {"item_id": i, "role": role, "file_id": 1}
                for i in items
                for role in ("original", "thumb")
            ],
        )
        before_audio = conn.execute(select(audio_records).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
        before_roles = conn.execute(
            select(media_objects).order_by(media_objects.c.item_id, media_objects.c.role)
        ).all()
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0017"
    assert oldest_code(old_engine) == "0006", "it only widens and adds: older code still works"
    with old_engine.begin() as conn:
        assert conn.execute(select(audio_records).order_by(audio_records.c.id)).all() == (
            before_audio
        )
        stages = conn.execute(select(audio_records.c.stage).order_by(audio_records.c.id))
        assert list(stages.scalars()) == [*AUDIO_STAGES, "submitted"]
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == (
            before_media
        )
        media = conn.execute(
            select(media_items.c.stage, media_items.c.content_id).order_by(media_items.c.id)
        ).all()
        assert [tuple(r) for r in media] == [(stage, None) for stage in MEDIA_STAGES]
        assert (
            conn.execute(
                select(media_objects).order_by(media_objects.c.item_id, media_objects.c.role)
            ).all()
            == before_roles
        )
        conn.execute(
            insert(media_objects),
            [
                {"item_id": items[0], "role": r, "file_id": 1}
                for r in (Role.MOTION, Role.MOTION_ORIGINAL)
            ],
        )
        conn.execute(
            media_items.update()
            .where(media_items.c.id == items[0])
            .values(content_id="E905E6C6-C747-4805-942F-9904A0281F02")
        )
    with pytest.raises(IntegrityError), old_engine.begin() as conn:
        conn.execute(insert(media_objects).values(item_id=items[1], role="live", file_id=1))
