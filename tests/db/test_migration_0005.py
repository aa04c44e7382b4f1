"""Revision 0005 (sign-in addresses) upgrades a database made by 0004 with records in every
stage."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select, update

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import api_tokens, sign_in_addresses, texts, users, web_sessions
from tests.support.old_database import NOW, assert_kept, fill_for_alice, read_kept


def test_0005_keeps_every_record_and_session_and_adds_sign_in_addresses(
    old_engine: Engine,
) -> None:
    with old_engine.begin() as conn:
        fill_for_alice(conn)
        conn.execute(
            update(users)
            .where(users.c.id == 1)
            .values(password_hash="$argon2id$x", failed_sign_ins=2)
        )
        conn.execute(
            insert(web_sessions).values(
                user_id=1, token_hash="b" * 64, csrf_token="c", created_at=NOW, expires_at=NOW + 9
            )
        )
        conn.execute(
            insert(api_tokens).values(user_id=1, token_hash="a" * 64, label="cli", created_at=NOW)
        )
        before = read_kept(conn, users, web_sessions, api_tokens, texts)
    upgrade(old_engine)
    assert (revision := current_revision(old_engine)) is not None and revision >= "0005"
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        assert conn.execute(select(texts.c.body)).scalar_one() == "hello"
        assert conn.execute(select(api_tokens.c.label)).scalar_one() == "cli"
        assert conn.execute(select(sign_in_addresses)).all() == []
    with old_engine.begin() as conn:
        conn.execute(insert(sign_in_addresses).values(address="203.0.113.9", last_failed_at=1.0))
        row = conn.execute(select(sign_in_addresses)).mappings().one()
    assert row["failed"] == 0 and row["paused_until"] is None
