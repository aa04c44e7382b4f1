"""Owners, their API tokens, and their web sign-in.

Every record, album and item names an owner by user name (``audio_records.owner``,
``albums.owner``, ``media_items.owner``); a user is that name plus the bearer tokens that act
for it, and optionally a password (argon2id) and browser sessions for the web app. A token or
a session cookie is shown once and stored only as its SHA-256 (hex), so a copy of the database
does not hand out access.

Public surface::

    add_user, list_users          conveyor users create / list
    set_password, set_admin       conveyor users create --password / passwd / --admin
    create_token, list_tokens,    conveyor tokens create / list / revoke
    revoke_token, revoke_own_token
    authenticate                  bearer token → Account (the HTTP API)
    token_active, active_tokens   not revoked yet (open event streams re-check)
    check_password, address_key   sign-in (SignInPaused after repeated failures, per name
                                  and per client address)
    start_session, session_account, session_active, end_session
    Account, IssuedToken, SignedIn, SessionAccount, NewSession
"""

from conveyor.accounts.passwords import (
    SignedIn,
    SignInPaused,
    address_key,
    check_new_password,
    check_password,
    is_admin,
    set_admin,
    set_password,
)
from conveyor.accounts.sessions import (
    NewSession,
    SessionAccount,
    end_session,
    session_account,
    session_active,
    start_session,
)
from conveyor.accounts.tokens import (
    Account,
    IssuedToken,
    active_tokens,
    add_user,
    authenticate,
    clean_user_name,
    create_token,
    hash_token,
    list_tokens,
    list_users,
    revoke_own_token,
    revoke_token,
    token_active,
)

__all__ = [
    "Account",
    "IssuedToken",
    "NewSession",
    "SessionAccount",
    "SignInPaused",
    "SignedIn",
    "active_tokens",
    "add_user",
    "address_key",
    "authenticate",
    "check_new_password",
    "check_password",
    "clean_user_name",
    "create_token",
    "end_session",
    "hash_token",
    "is_admin",
    "list_tokens",
    "list_users",
    "revoke_own_token",
    "revoke_token",
    "session_account",
    "session_active",
    "set_admin",
    "set_password",
    "start_session",
    "token_active",
]
