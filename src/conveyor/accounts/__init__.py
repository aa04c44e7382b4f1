"""Owners and their API tokens.

Every record, album and item names an owner by user name (``audio_records.owner``,
``albums.owner``, ``media_items.owner``); a user is that name plus the bearer tokens that act
for it. A token is shown once when created and stored only as its SHA-256 (hex), so a copy of
the database does not hand out access.

Public surface::

    add_user, list_users          conveyor users add / list
    create_token, list_tokens,    conveyor tokens create / list / revoke
    revoke_token
    authenticate                  bearer token → Account (the HTTP API)
    token_active, active_tokens   not revoked yet (open event streams re-check)
    Account, IssuedToken
"""

from conveyor.accounts.tokens import (
    Account,
    IssuedToken,
    active_tokens,
    add_user,
    authenticate,
    create_token,
    hash_token,
    list_tokens,
    list_users,
    revoke_token,
    token_active,
)

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
    "revoke_token",
    "token_active",
]
