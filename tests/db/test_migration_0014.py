"""Revision 0014 (album sharing: ``album_shares``, ``album_links``, ``media_items.added_by``)
upgrades a database made by 0013 with records in every stage: every row kept, each existing item
added by its owner, nothing shared; the new tables take shares and links afterwards."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import album_links, album_shares, media_items, users
from tests.support.old_database import MEDIA_STAGES, NOW, assert_kept, fill_for_alice, read_kept


def test_0014_keeps_every_record_and_marks_each_item_added_by_its_owner(
    old_engine: Engine,
) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        conn.execute(users.insert().values(id=2, name="bob", created_at=NOW))
        before = read_kept(conn, users)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0014"
    assert oldest_code(old_engine) == "0006", "it only adds: older code still works"
    assert_kept(old_engine, before)
    with old_engine.begin() as conn:
        media = conn.execute(
            select(media_items.c.stage, media_items.c.added_by).order_by(media_items.c.id)
        ).all()
        assert [tuple(r) for r in media] == [(stage, "alice") for stage in MEDIA_STAGES]
        assert conn.execute(select(album_shares)).all() == []
        assert conn.execute(select(album_links)).all() == []
        conn.execute(
            insert(album_shares).values(album_id=1, user_id=2, role="viewer", created_at=NOW)
        )
        conn.execute(insert(album_links).values(album_id=1, token_hash="a" * 64, created_at=NOW))
    # The role is one of the two words; one share per user and album.
    for user_id, role in ((1, "owner"), (2, "contributor")):
        with pytest.raises(IntegrityError), old_engine.begin() as conn:
            conn.execute(
                insert(album_shares).values(album_id=1, user_id=user_id, role=role, created_at=NOW)
            )
