"""Statements on ``users`` and ``api_tokens`` (SQLAlchemy Core)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import Connection, RowMapping, delete, insert, select, update

from conveyor.db.tables import api_tokens, users

__all__ = [
    "delete_token",
    "insert_token",
    "insert_user",
    "list_users",
    "token_exists",
    "token_owner",
    "tokens_of",
    "touch_token",
    "user_by_name",
]


def insert_user(conn: Connection, *, name: str, created_at: float) -> int:
    """Insert a ``users`` row; returns its id (IntegrityError when the name is taken)."""
    result = conn.execute(insert(users).values(name=name, created_at=created_at))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def user_by_name(conn: Connection, name: str) -> RowMapping | None:
    """The user called ``name``."""
    return conn.execute(select(users).where(users.c.name == name)).mappings().first()


def list_users(conn: Connection) -> Sequence[RowMapping]:
    """Every user, oldest first."""
    return conn.execute(select(users).order_by(users.c.id)).mappings().all()


def insert_token(
    conn: Connection, *, user_id: int, token_hash: str, label: str | None, created_at: float
) -> int:
    """Insert an ``api_tokens`` row (the hash only); returns its id."""
    result = conn.execute(
        insert(api_tokens).values(
            user_id=user_id, token_hash=token_hash, label=label, created_at=created_at
        )
    )
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def token_owner(conn: Connection, token_hash: str) -> RowMapping | None:
    """The token row with that hash joined to its user: ``token_id``, ``last_used_at``,
    ``user_id``, ``name``."""
    query = (
        select(
            api_tokens.c.id.label("token_id"),
            api_tokens.c.last_used_at,
            users.c.id.label("user_id"),
            users.c.name,
        )
        .join(users, users.c.id == api_tokens.c.user_id)
        .where(api_tokens.c.token_hash == token_hash)
    )
    return conn.execute(query).mappings().first()


def token_exists(conn: Connection, token_id: int) -> bool:
    """True while the token ``token_id`` is not revoked (one primary-key read)."""
    query = select(api_tokens.c.id).where(api_tokens.c.id == token_id)
    return conn.execute(query).first() is not None


def touch_token(conn: Connection, token_id: int, now: float) -> None:
    """Record when a token was last used."""
    conn.execute(update(api_tokens).where(api_tokens.c.id == token_id).values(last_used_at=now))


def tokens_of(conn: Connection, user_id: int) -> Sequence[RowMapping]:
    """A user's tokens (without their hashes), oldest first."""
    query = (
        select(
            api_tokens.c.id,
            api_tokens.c.label,
            api_tokens.c.created_at,
            api_tokens.c.last_used_at,
        )
        .where(api_tokens.c.user_id == user_id)
        .order_by(api_tokens.c.id)
    )
    return conn.execute(query).mappings().all()


def delete_token(conn: Connection, token_id: int) -> bool:
    """Delete a token; True when it existed."""
    return conn.execute(delete(api_tokens).where(api_tokens.c.id == token_id)).rowcount == 1


def existing_tokens(conn: Connection, token_ids: Collection[int]) -> set[int]:
    """Those of ``token_ids`` not revoked (one query for many open streams)."""
    if not token_ids:
        return set()
    query = select(api_tokens.c.id).where(api_tokens.c.id.in_(sorted(set(token_ids))))
    return {int(i) for i in conn.execute(query).scalars()}
