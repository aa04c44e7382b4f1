"""Bearer-token authentication: every ``/api`` route acts for exactly one owner.

``Authorization: Bearer <token>``; the token's SHA-256 is looked up in ``api_tokens``
(:func:`conveyor.accounts.authenticate`). Missing, malformed or unknown → 401 with
``WWW-Authenticate: Bearer``. Routes then read and write only rows whose ``owner`` is the
account's name; another owner's record, item, album or file answers 404, exactly as one that
does not exist (its existence is never revealed).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from conveyor.accounts import Account, authenticate
from conveyor.api.errors import ApiError
from conveyor.api.state import State

__all__ = ["Owner", "current_account"]

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A token from `conveyor tokens create USER`.",
)


def current_account(
    state: State,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Account:
    """The account the request's bearer token acts for.

    Raises:
        ApiError: 401 when the token is missing or unknown.
    """
    if credentials is None:
        raise ApiError(
            401,
            "unauthorized",
            "this route needs a bearer token: Authorization: Bearer <token>",
            headers={"WWW-Authenticate": 'Bearer realm="conveyor"'},
        )
    runtime = state.runtime
    account = authenticate(runtime.engine, runtime.clock, credentials.credentials)
    if account is None:
        raise ApiError(
            401,
            "invalid_token",
            "the bearer token is unknown or revoked",
            headers={"WWW-Authenticate": 'Bearer realm="conveyor", error="invalid_token"'},
        )
    return account


Owner = Annotated[Account, Depends(current_account)]
