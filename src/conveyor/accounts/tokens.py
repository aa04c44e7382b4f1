"""Users and bearer tokens: create, list, revoke, authenticate.

A token is ``secrets.token_urlsafe(32)`` (256 random bits), returned once by
:func:`create_token` and stored only as its SHA-256 hex digest. A plain hash (no salt, no slow
KDF) is enough for 256-bit random secrets: there is nothing to guess, and lookup by hash keeps
authentication one indexed read.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from conveyor.accounts import queries
from conveyor.clock import Clock
from conveyor.error_codes import ErrorCode
from conveyor.errors import Conflict, NotFound, RejectedInput, check_text
from conveyor.limits import TOKEN_LABEL, USER_NAME

__all__ = [
    "Account",
    "IssuedToken",
    "active_tokens",
    "add_user",
    "authenticate",
    "create_token",
    "hash_token",
    "list_tokens",
    "list_users",
    "revoke_own_token",
    "revoke_token",
    "token_active",
]

# Seconds between writes of ``last_used_at``: a busy client must not turn every read into a
# write (on SQLite writers serialise with the workers).
_TOUCH_EVERY = 60.0
_MAX_NAME = USER_NAME.longest


@dataclass(frozen=True)
class Account:
    """The owner a request acts for.

    Attributes:
        user_id: ``users.id``.
        name: the user name; records, albums and items name their owner by it.
        token_id: the ``api_tokens.id`` that authenticated the request.
    """

    user_id: int
    name: str
    token_id: int


@dataclass(frozen=True)
class IssuedToken:
    """A token just created: ``token`` is the secret, shown once and never stored."""

    id: int
    user: str
    token: str
    label: str | None


def hash_token(token: str) -> str:
    """The stored form of a token: SHA-256 of its UTF-8 bytes, 64 hex digits."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def clean_user_name(name: str) -> str:
    """``name`` without the spaces around it, as a user row keeps it.

    Raises:
        RejectedInput: ``no_name`` when nothing is left; ``bad_name`` when it is longer than
            100 characters or has a space or a character that is not printable.
    """
    name = name.strip()
    if not name:
        raise RejectedInput(ErrorCode.NO_NAME, "a user needs a name")
    if len(name) > _MAX_NAME or any(c.isspace() or not c.isprintable() for c in name):
        raise RejectedInput(
            ErrorCode.BAD_NAME, f"a user name is 1-{_MAX_NAME} printable characters without spaces"
        )
    return name


def add_user(engine: Engine, clock: Clock, name: str) -> int:
    """Create the user ``name``.

    Returns:
        The user's id.

    Raises:
        RejectedInput: ``no_name`` or ``bad_name`` (blank, too long, spaces).
        Conflict: a user of that name exists.
    """
    name = clean_user_name(name)
    try:
        with engine.begin() as conn:
            return queries.insert_user(conn, name=name, created_at=clock.now())
    except IntegrityError:
        raise Conflict(f"user {name!r} already exists") from None


def list_users(engine: Engine) -> list[dict[str, Any]]:
    """Every user: ``id``, ``name``, ``created_at`` (epoch seconds), ``has_password``,
    ``is_admin`` (never the password hash)."""
    with engine.connect() as conn:
        return [
            {
                "id": r["id"],
                "name": r["name"],
                "created_at": r["created_at"],
                "has_password": r["password_hash"] is not None,
                "is_admin": bool(r["is_admin"]),
            }
            for r in queries.list_users(conn)
        ]


def create_token(
    engine: Engine, clock: Clock, user: str, *, label: str | None = None
) -> IssuedToken:
    """Mint a bearer token for ``user``; only its hash is stored.

    Raises:
        NotFound: no such user.
        RejectedInput: ``invalid_request``: a ``label`` past :data:`~conveyor.limits.TOKEN_LABEL`
            (over 100 characters, or a control character); nothing is stored.
    """
    check_text(TOKEN_LABEL, label, "the token's note")
    token = secrets.token_urlsafe(32)
    with engine.begin() as conn:
        row = queries.user_by_name(conn, user.strip())
        if row is None:
            raise NotFound(f"user {user!r} does not exist")
        token_id = queries.insert_token(
            conn,
            user_id=int(row["id"]),
            token_hash=hash_token(token),
            label=label,
            created_at=clock.now(),
        )
    return IssuedToken(id=token_id, user=str(row["name"]), token=token, label=label)


def list_tokens(engine: Engine, user: str) -> list[dict[str, Any]]:
    """A user's tokens: ``id``, ``label``, ``created_at``, ``last_used_at`` (never the secret).

    Raises:
        NotFound: no such user.
    """
    with engine.connect() as conn:
        row = queries.user_by_name(conn, user.strip())
        if row is None:
            raise NotFound(f"user {user!r} does not exist")
        return [dict(r) for r in queries.tokens_of(conn, int(row["id"]))]


def revoke_token(engine: Engine, token_id: int) -> None:
    """Delete a token; requests bearing it get 401 from then on.

    Raises:
        NotFound: no such token.
    """
    with engine.begin() as conn:
        if not queries.delete_token(conn, token_id):
            raise NotFound(f"token {token_id} does not exist")


def active_tokens(engine: Engine, token_ids: Collection[int]) -> set[int]:
    """Those of ``token_ids`` that are not revoked: every open stream's token, one query."""
    with engine.connect() as conn:
        return queries.existing_tokens(conn, token_ids)


def revoke_own_token(engine: Engine, user_id: int, token_id: int) -> None:
    """Delete a token of ``user_id`` (the web app's token page).

    Raises:
        NotFound: no such token of theirs (another user's token is not revealed).
    """
    with engine.begin() as conn:
        if queries.token_of_user(conn, token_id, user_id) is None:
            raise NotFound(f"token {token_id} does not exist")
        queries.delete_token(conn, token_id)


def token_active(engine: Engine, token_id: int) -> bool:
    """True while the token ``token_id`` is not revoked: open event streams re-check it."""
    with engine.connect() as conn:
        return queries.token_exists(conn, token_id)


def authenticate(engine: Engine, clock: Clock, token: str) -> Account | None:
    """The account a bearer token acts for, or None for an unknown token.

    Writes ``last_used_at`` at most once a minute per token.
    """
    if not token or len(token) > 512:
        return None
    digest = hash_token(token)
    with engine.connect() as conn:
        row = queries.token_owner(conn, digest)
    if row is None:
        return None
    now = clock.now()
    last = row["last_used_at"]
    if last is None or now - float(last) >= _TOUCH_EVERY:
        with engine.begin() as conn:
            queries.touch_token(conn, int(row["token_id"]), now)
    return Account(
        user_id=int(row["user_id"]), name=str(row["name"]), token_id=int(row["token_id"])
    )
