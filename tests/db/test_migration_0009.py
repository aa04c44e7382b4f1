"""Revision 0009 (search_texts, with SQLite's FTS5 index or PostgreSQL's GIN index) upgrades a
database made by 0008 with records in every stage, and what was there is found at once."""

from __future__ import annotations

from sqlalchemy import Engine

from conveyor.audio.search import search_records
from conveyor.db.migrate import current_revision, upgrade
from tests.support.old_database import assert_kept, fill_for_alice


def test_0009_keeps_every_record_and_indexes_their_titles_and_texts(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        before = fill_for_alice(conn)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0009"
    assert_kept(old_engine, before)
    # Record 5's transcript and every title were there before: search finds them now.
    hello = search_records(old_engine, "alice", "hello")
    assert [(h.record_id, h.kind) for h in hello] == [(5, "transcript")]
    assert [(h.record_id, h.kind) for h in search_records(old_engine, "alice", "t3")] == [
        (3, "title")
    ]
    assert search_records(old_engine, "bob", "hello") == []
