"""Revision 0004 (web sign-in) upgrades a database made by 0003 with records in every stage."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import api_tokens, texts, users, web_sessions
from tests.support.old_database import NOW, assert_kept, fill_for_alice, read_kept


def test_0004_keeps_every_record_and_adds_sign_in(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        conn.execute(
            insert(api_tokens).values(user_id=1, token_hash="a" * 64, label="cli", created_at=NOW)
        )
        before = read_kept(conn, api_tokens, texts)
    upgrade(old_engine)
    assert (revision := current_revision(old_engine)) is not None and revision >= "0004"
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
        user = conn.execute(select(users)).mappings().one()
        assert user["name"] == "alice" and user["password_hash"] is None
        assert user["is_admin"] is False and user["failed_sign_ins"] == 0
        assert conn.execute(select(api_tokens.c.label)).scalar_one() == "cli"
        assert conn.execute(select(web_sessions)).all() == []
