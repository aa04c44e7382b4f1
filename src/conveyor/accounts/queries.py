"""Statements on ``users``, ``api_tokens``, sessions and sign-in addresses (SQLAlchemy Core)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import Connection, RowMapping, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from conveyor.db.tables import api_tokens, sign_in_addresses, users, web_sessions

__all__ = [
    "address_paused_until",
    "clear_failed_sign_ins",
    "delete_expired_sessions",
    "delete_session",
    "delete_sessions_of",
    "delete_token",
    "existing_tokens",
    "insert_session",
    "insert_token",
    "insert_user",
    "list_users",
    "lock_address",
    "pause_sign_in",
    "prune_addresses",
    "record_failed_sign_in",
    "save_address_failures",
    "session_exists",
    "session_owner",
    "set_admin",
    "set_password_hash",
    "token_exists",
    "token_of_user",
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


def set_password_hash(conn: Connection, user_id: int, password_hash: str | None) -> None:
    """Store a user's password hash (a new password also lifts a sign-in pause)."""
    conn.execute(
        update(users)
        .where(users.c.id == user_id)
        .values(password_hash=password_hash, failed_sign_ins=0, sign_in_paused_until=None)
    )


def set_admin(conn: Connection, user_id: int, is_admin: bool) -> None:
    """Mark a user an administrator (the operator view) or not."""
    conn.execute(update(users).where(users.c.id == user_id).values(is_admin=is_admin))


def record_failed_sign_in(conn: Connection, user_id: int, paused_until: float | None) -> int:
    """Count one more failed sign-in in a row; returns the new count."""
    conn.execute(
        update(users)
        .where(users.c.id == user_id)
        .values(
            failed_sign_ins=users.c.failed_sign_ins + 1,
            sign_in_paused_until=paused_until,
        )
    )
    row = conn.execute(select(users.c.failed_sign_ins).where(users.c.id == user_id)).first()
    return 0 if row is None else int(row[0])


def pause_sign_in(conn: Connection, user_id: int, paused_until: float) -> None:
    """Refuse sign-ins of a user until ``paused_until`` (epoch s)."""
    conn.execute(
        update(users).where(users.c.id == user_id).values(sign_in_paused_until=paused_until)
    )


def clear_failed_sign_ins(conn: Connection, user_id: int) -> None:
    """A successful sign-in: the failure count starts again at zero."""
    conn.execute(
        update(users)
        .where(users.c.id == user_id)
        .values(failed_sign_ins=0, sign_in_paused_until=None)
    )


def insert_session(
    conn: Connection,
    *,
    user_id: int,
    token_hash: str,
    csrf_token: str,
    created_at: float,
    expires_at: float,
) -> int:
    """Insert a ``web_sessions`` row (the cookie's hash only); returns its id."""
    result = conn.execute(
        insert(web_sessions).values(
            user_id=user_id,
            token_hash=token_hash,
            csrf_token=csrf_token,
            created_at=created_at,
            expires_at=expires_at,
        )
    )
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def session_owner(conn: Connection, token_hash: str) -> RowMapping | None:
    """The session with that cookie hash joined to its user: ``session_id``, ``csrf_token``,
    ``expires_at``, ``user_id``, ``name``, ``is_admin``."""
    query = (
        select(
            web_sessions.c.id.label("session_id"),
            web_sessions.c.csrf_token,
            web_sessions.c.expires_at,
            users.c.id.label("user_id"),
            users.c.name,
            users.c.is_admin,
        )
        .join(users, users.c.id == web_sessions.c.user_id)
        .where(web_sessions.c.token_hash == token_hash)
    )
    return conn.execute(query).mappings().first()


def session_exists(conn: Connection, session_id: int) -> bool:
    """True while the session is not signed out (one primary-key read)."""
    query = select(web_sessions.c.id).where(web_sessions.c.id == session_id)
    return conn.execute(query).first() is not None


def delete_session(conn: Connection, session_id: int) -> None:
    """Sign a session out."""
    conn.execute(delete(web_sessions).where(web_sessions.c.id == session_id))


def delete_sessions_of(conn: Connection, user_id: int) -> None:
    """Sign every session of a user out (a new password)."""
    conn.execute(delete(web_sessions).where(web_sessions.c.user_id == user_id))


def delete_expired_sessions(conn: Connection, now: float) -> None:
    """Drop sessions whose time is up."""
    conn.execute(delete(web_sessions).where(web_sessions.c.expires_at <= now))


def token_of_user(conn: Connection, token_id: int, user_id: int) -> RowMapping | None:
    """The token ``token_id`` if it belongs to ``user_id``."""
    query = select(api_tokens.c.id).where(
        api_tokens.c.id == token_id, api_tokens.c.user_id == user_id
    )
    return conn.execute(query).mappings().first()


def address_paused_until(conn: Connection, address: str) -> float | None:
    """Until when (epoch s) sign-ins from ``address`` are paused, or None."""
    row = conn.execute(
        select(sign_in_addresses.c.paused_until).where(sign_in_addresses.c.address == address)
    ).first()
    return None if row is None or row[0] is None else float(row[0])


def lock_address(conn: Connection, address: str, now: float) -> RowMapping:
    """The address's row, made if missing and locked for this transaction (PostgreSQL)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(
        dialect.insert(sign_in_addresses)
        .values(address=address, failed=0, last_failed_at=now)
        .on_conflict_do_nothing(index_elements=["address"])
    )
    return (
        conn.execute(
            select(sign_in_addresses)
            .where(sign_in_addresses.c.address == address)
            .with_for_update()
        )
        .mappings()
        .one()
    )


def save_address_failures(
    conn: Connection, address: str, failed: int, now: float, paused_until: float | None
) -> None:
    """Store the address's count of failed sign-ins, the last one's time, and its pause."""
    conn.execute(
        update(sign_in_addresses)
        .where(sign_in_addresses.c.address == address)
        .values(failed=failed, last_failed_at=now, paused_until=paused_until)
    )


def prune_addresses(
    conn: Connection, quiet_since: float, names_quiet_since: float, now: float
) -> None:
    """Forget addresses with no failure since ``quiet_since`` (names that do not exist, kept
    under ``name:``: since ``names_quiet_since``) and no pause still running."""
    table = sign_in_addresses
    is_name = table.c.address.startswith("name:", autoescape=True)
    conn.execute(
        delete(table).where(
            ((~is_name) & (table.c.last_failed_at < quiet_since))
            | (is_name & (table.c.last_failed_at < names_quiet_since)),
            (table.c.paused_until.is_(None)) | (table.c.paused_until <= now),
        )
    )
