"""Revision 0018 (``media_items.kind`` widened to VARCHAR(32)) upgrades a database made by 0017
with records in every stage and role rows: every record, role row and album event is kept, ids
are still never reused after the newest item was deleted (SQLite rebuilds the table), a word
longer than eight letters fits the column and the CHECK constraint still refuses a word outside
``kinds.MediaKind``; the downgrade narrows it again, rows kept."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import Engine, String, delete, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from conveyor.db.migrate import alembic_config, current_revision, oldest_code, upgrade
from conveyor.db.tables import album_events, media_items, media_objects
from conveyor.kinds import MediaKind
from tests.support.old_database import NOW, assert_kept, fill_for_alice, read_kept


def _kind_width(engine: Engine) -> int:
    (kind,) = [c for c in inspect(engine).get_columns("media_items") if c["name"] == "kind"]
    assert isinstance(kind["type"], String)
    return int(kind["type"].length or 0)


def test_0018_widens_the_kind_and_keeps_every_record_role_and_id(old_engine: Engine) -> None:
    assert _kind_width(old_engine) == 8
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        items = list(conn.execute(select(media_items.c.id).order_by(media_items.c.id)).scalars())
        newest = max(items) + 1
        conn.execute(
            insert(media_items).values(
                id=newest,
                owner="alice",
                album_id=1,
                kind=MediaKind.VIDEO,
                uploaded_at=NOW,
                stage="done",
                state_entered_at=NOW,
                updated_at=NOW,
            )
        )
        conn.execute(
            insert(media_objects),
            [{"item_id": i, "role": r, "file_id": 1} for i in items for r in ("original", "thumb")],
        )
        conn.execute(
            insert(album_events),
            [
                {
                    "album_id": 1,
                    "item_id": i,
                    "kind": "item.ready",
                    "payload": {},
                    "created_at": NOW,
                }
                for i in items
            ],
        )
        # The newest item deleted: its id must not be handed out again after the rebuild.
        conn.execute(delete(media_items).where(media_items.c.id == newest))
        before = read_kept(conn, media_objects, album_events)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0018"
    assert oldest_code(old_engine) == "0006", "it only widens: older code still works"
    assert _kind_width(old_engine) == 32
    assert_kept(old_engine, before)
    with old_engine.begin() as conn:
        if old_engine.dialect.name == "sqlite":  # rebuilt: does it still know the highest id?
            # (PostgreSQL's sequence is untouched; the ids filled in here never advanced it.)
            added = conn.execute(
                insert(media_items)
                .values(
                    owner="alice",
                    album_id=1,
                    kind=MediaKind.PHOTO,
                    uploaded_at=NOW,
                    stage="uploaded",
                    state_entered_at=NOW,
                    updated_at=NOW,
                )
                .returning(media_items.c.id)
            ).scalar_one()
            assert added > newest, "the deleted newest item's id was handed out again"
    # A word longer than eight letters fits the column now; the CHECK refuses one that is no
    # MediaKind (a later revision's kind, such as "animation", would be taken).
    with (
        pytest.raises(IntegrityError, match=r"ck_media_items_kind|CHECK"),
        old_engine.begin() as conn,
    ):
        conn.execute(
            insert(media_items).values(
                owner="alice",
                album_id=1,
                kind="not_a_kind_of_item",
                uploaded_at=NOW,
                stage="uploaded",
                state_entered_at=NOW,
                updated_at=NOW,
            )
        )


def test_0018_downgrades_to_eight_letters_with_every_row_kept(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
    upgrade(old_engine)
    with old_engine.connect() as conn:
        # In the columns 0017 has: what the downgrade keeps (later revisions' go with theirs).
        before = read_kept(conn, media_objects, album_events, revision="0017")
    command.downgrade(alembic_config(old_engine), "0017")
    assert _kind_width(old_engine) == 8
    assert_kept(old_engine, before)
