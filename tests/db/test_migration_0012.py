"""Revision 0012 (a media item's capture zone and incomplete flag) upgrades a database made by
0011 with records in every stage: every row kept, the zone unknown, nothing flagged."""

from __future__ import annotations

from sqlalchemy import Engine, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import media_items, texts
from tests.support.old_database import assert_kept, fill_for_alice


def test_0012_keeps_every_item_with_the_zone_unknown_and_nothing_flagged(
    old_engine: Engine,
) -> None:
    with old_engine.begin() as conn:
        before = fill_for_alice(conn)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0012"
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        added = select(media_items.c.captured_offset, media_items.c.incomplete)
        after = conn.execute(added.order_by(media_items.c.id)).all()
        assert [tuple(r) for r in after] == [(None, False)] * 3
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
