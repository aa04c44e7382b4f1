"""Browser sessions: a random cookie stored only as its SHA-256, and the session's CSRF token.

The cookie value is ``secrets.token_urlsafe(32)``; the database keeps its hash (like API
tokens), so a copy of the database signs nobody in. Each session has its own CSRF token,
which every form and state-changing request of the web app must send back (synchronizer
token). A session lasts :data:`SESSION_LIFETIME` seconds; signing out deletes it, and so does a
new password.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import Engine

from conveyor.accounts import queries
from conveyor.accounts.tokens import hash_token
from conveyor.clock import Clock

__all__ = [
    "SESSION_LIFETIME",
    "NewSession",
    "SessionAccount",
    "end_session",
    "session_account",
    "session_active",
    "start_session",
]

SESSION_LIFETIME = 14 * 24 * 3600.0


@dataclass(frozen=True)
class NewSession:
    """A session just started: ``cookie`` is the secret for the browser, never stored."""

    id: int
    cookie: str
    csrf_token: str
    expires_at: float


@dataclass(frozen=True)
class SessionAccount:
    """The signed-in user of a browser request.

    Attributes:
        user_id: ``users.id``.
        name: the owner name of their records, albums and items.
        is_admin: may open the operator view.
        session_id: ``web_sessions.id`` (the live streams re-check it).
        csrf_token: what the session's forms must send back.
    """

    user_id: int
    name: str
    is_admin: bool
    session_id: int
    csrf_token: str


def start_session(engine: Engine, clock: Clock, user_id: int) -> NewSession:
    """A new session for ``user_id`` (after a good password); expired ones are dropped."""
    cookie = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    now = clock.now()
    expires = now + SESSION_LIFETIME
    with engine.begin() as conn:
        queries.delete_expired_sessions(conn, now)
        session_id = queries.insert_session(
            conn,
            user_id=user_id,
            token_hash=hash_token(cookie),
            csrf_token=csrf,
            created_at=now,
            expires_at=expires,
        )
    return NewSession(id=session_id, cookie=cookie, csrf_token=csrf, expires_at=expires)


def session_account(engine: Engine, clock: Clock, cookie: str) -> SessionAccount | None:
    """The user a session cookie signs in, or None (unknown, signed out or expired)."""
    if not cookie or len(cookie) > 512:
        return None
    with engine.connect() as conn:
        row = queries.session_owner(conn, hash_token(cookie))
    if row is None or float(row["expires_at"]) <= clock.now():
        return None
    return SessionAccount(
        user_id=int(row["user_id"]),
        name=str(row["name"]),
        is_admin=bool(row["is_admin"]),
        session_id=int(row["session_id"]),
        csrf_token=str(row["csrf_token"]),
    )


def session_active(engine: Engine, session_id: int) -> bool:
    """True while the session is not signed out: open live streams re-check it."""
    with engine.connect() as conn:
        return queries.session_exists(conn, session_id)


def end_session(engine: Engine, session_id: int) -> None:
    """Sign out: the session's cookie signs nobody in from now on."""
    with engine.begin() as conn:
        queries.delete_session(conn, session_id)
