"""Revision 0010 (an index on ``files.sha256``) upgrades a database made by 0009 with records
in every stage, and intake then finds content an owner already holds in it."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, select, update

from conveyor.audio import queries as audio_queries
from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import files, texts
from conveyor.media import queries as media_queries
from tests.support.old_database import assert_kept, fill_for_alice, read_kept


def test_0010_keeps_every_record_and_indexes_content_hashes(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        conn.execute(update(files).where(files.c.id == 1).values(sha256="ab" * 32))
        before = read_kept(conn, files)
    upgrade(old_engine)
    assert current_revision(old_engine) == "0010" or (current_revision(old_engine) or "") > "0010"
    indexes = {ix["name"] for ix in inspect(old_engine).get_indexes("files")}
    assert "ix_files_sha256" in indexes
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
        # Every record of the old database shares file 1: the oldest is the one that holds it.
        assert audio_queries.record_with_content(conn, "alice", "ab" * 32) == 1
        assert audio_queries.record_with_content(conn, "bob", "ab" * 32) is None
        assert media_queries.item_with_content(conn, "alice", "cd" * 32) is None
