"""Revision 0015 (``AUTOINCREMENT`` on ``albums``, ``audio_records`` and ``media_items``, SQLite
only) upgrades a database made by 0014 with records in every stage: every row kept with its id,
nothing that hangs off a record, item or album removed by the table rebuild (a transcript, an
album's items and events), the partial claim indexes still there; afterwards the id of a deleted
newest row is not handed out again. On PostgreSQL (sequences) the revision changes nothing."""

from __future__ import annotations

from sqlalchemy import Engine, delete, func, insert, inspect, select, text

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import album_events, albums, audio_records, media_items, texts
from tests.support.old_database import (
    NOW,
    assert_kept,
    fill_every_stage,
    read_kept,
)

QUEUE = {"state_entered_at": NOW, "attempts": 0, "updated_at": NOW}


def indexes(engine: Engine, table: str) -> set[str]:
    return {str(i["name"]) for i in inspect(engine).get_indexes(table)}


def test_0015_keeps_every_row_and_never_hands_a_deleted_id_out_again(
    old_engine: Engine,
) -> None:
    with old_engine.begin() as conn:
        fill_every_stage(conn, NOW, owner="alice")
        conn.execute(
            insert(album_events).values(
                album_id=1, item_id=2, kind="item.ready", payload="{}", created_at=NOW
            )
        )
        if old_engine.dialect.name == "postgresql":
            # The rows were written with their ids; a database the service filled has its
            # sequences past them.
            for table in ("albums", "audio_records", "media_items"):
                conn.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))"
                    )
                )
        before = read_kept(conn, albums, texts, album_events)
    before_indexes = {t: indexes(old_engine, t) for t in ("audio_records", "media_items")}

    # The partial claim indexes are compared at 0015 itself (later revisions add their own).
    upgrade(old_engine, "0015")
    assert {t: indexes(old_engine, t) for t in before_indexes} == before_indexes
    upgrade(old_engine)

    assert (current_revision(old_engine) or "") >= "0015"
    assert oldest_code(old_engine) == "0006", "only a keyword: older code still works"
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        transcripts = conn.execute(select(texts.c.record_id)).scalars().all()
        assert transcripts == [5], "the transcript is still there"
        if old_engine.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []

    # The newest of each deleted, then a new one: a new id, never the deleted one.
    newest_record, newest_item = len(before.audio), len(before.media)
    with old_engine.begin() as conn:
        conn.execute(delete(audio_records).where(audio_records.c.id == newest_record))
        conn.execute(delete(media_items).where(media_items.c.id == newest_item))
        record = conn.execute(
            insert(audio_records)
            .values(owner="alice", created_at=NOW, original_file_id=1, stage="uploaded", **QUEUE)
            .returning(audio_records.c.id)
        ).scalar_one()
        item = conn.execute(
            insert(media_items)
            .values(
                owner="alice", album_id=1, kind="photo", uploaded_at=NOW, stage="uploaded", **QUEUE
            )
            .returning(media_items.c.id)
        ).scalar_one()
        conn.execute(delete(albums).where(albums.c.id == 1))
        album = conn.execute(
            insert(albums).values(owner="alice", name="Trip", created_at=NOW).returning(albums.c.id)
        ).scalar_one()
        # The album's deletion still cascades (its foreign keys are on again).
        assert conn.execute(select(func.count()).select_from(media_items)).scalar_one() == 0
    assert (record, item, album) == (newest_record + 1, newest_item + 1, 2)


def test_0015_leaves_postgresql_as_it_was(old_engine: Engine) -> None:
    if old_engine.dialect.name != "postgresql":
        return  # the SQLite side is the test above
    with old_engine.connect() as conn:
        before = conn.execute(
            text(
                "SELECT table_name, column_name, column_default FROM information_schema.columns "
                "WHERE table_schema = 'public' ORDER BY 1, 2"
            )
        ).all()
    upgrade(old_engine, "0015")  # (later revisions add columns of their own)
    with old_engine.connect() as conn:
        after = conn.execute(
            text(
                "SELECT table_name, column_name, column_default FROM information_schema.columns "
                "WHERE table_schema = 'public' ORDER BY 1, 2"
            )
        ).all()
    assert after == before


def test_0015_down_and_up_again_keeps_every_row(old_engine: Engine) -> None:
    from alembic import command

    from conveyor.db.migrate import alembic_config

    with old_engine.begin() as conn:
        fill_every_stage(conn, NOW, owner="alice")
    # From the head: the later revisions' downgrades must leave what 0015's reads.
    upgrade(old_engine)
    with old_engine.connect() as conn:
        before = read_kept(conn, albums, texts)
    command.downgrade(alembic_config(old_engine), "0014")
    assert current_revision(old_engine) == "0014"
    upgrade(old_engine)
    assert_kept(old_engine, before)
