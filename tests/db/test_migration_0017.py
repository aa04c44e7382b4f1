"""Revision 0017 (motion photos and Live Photos: the ``motion`` and ``motion_original`` roles,
``media_items.content_id``) upgrades a database made by 0016 with records in every stage: every
record and every role row kept, no content identifier yet; the widened CHECK constraint (made
from ``kinds.Role``) takes the new roles and still refuses a word outside it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import media_items, media_objects
from conveyor.kinds import Role
from tests.support.old_database import assert_kept, fill_for_alice, read_kept


def test_0017_keeps_every_record_and_role_and_takes_the_motion_roles(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        items = list(conn.execute(select(media_items.c.id).order_by(media_items.c.id)).scalars())
        conn.execute(
            insert(media_objects),
            [
                {"item_id": i, "role": role, "file_id": 1}
                for i in items
                for role in ("original", "thumb")
            ],
        )
        before = read_kept(conn, media_objects)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0017"
    assert oldest_code(old_engine) == "0006", "it only widens and adds: older code still works"
    assert_kept(old_engine, before)
    with old_engine.begin() as conn:
        content_ids = conn.execute(select(media_items.c.content_id).order_by(media_items.c.id))
        assert list(content_ids.scalars()) == [None] * len(items)
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
