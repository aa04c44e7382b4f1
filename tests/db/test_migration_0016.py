"""Revision 0016 (``texts.kind`` CHECK) upgrades a database made by 0015 with records in every
stage and a text of every kind: every row is kept, and a kind outside ``TextKind`` is refused."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from conveyor.db.migrate import current_revision, oldest_code, upgrade
from conveyor.db.tables import audio_records, texts
from conveyor.kinds import TextKind
from tests.support.old_database import NOW, assert_kept, fill_for_alice, read_kept


def test_0016_keeps_every_text_and_refuses_an_unknown_kind(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        for kind in (TextKind.PROOFREAD, TextKind.HINTS):
            conn.execute(insert(texts).values(record_id=5, kind=kind, body=kind, created_at=NOW))
        before = read_kept(conn, texts)
    assert [r.kind for r in before.rows["texts"]] == ["transcript", "proofread", "hints"]
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0016"
    assert oldest_code(old_engine) == "0006", "no row changes: older code still works"
    assert_kept(old_engine, before)
    with pytest.raises(IntegrityError), old_engine.begin() as conn:
        conn.execute(insert(texts).values(record_id=4, kind="summary", body="x", created_at=NOW))
    with old_engine.begin() as conn:  # the record's texts still cascade with it
        conn.execute(audio_records.delete().where(audio_records.c.id == 5))
    with old_engine.connect() as conn:
        assert conn.execute(select(texts)).all() == []
