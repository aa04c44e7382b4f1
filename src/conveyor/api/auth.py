"""Bearer-token authentication: every ``/api`` route acts for exactly one owner.

``Authorization: Bearer <token>``; the token's SHA-256 is looked up in ``api_tokens``
(:func:`conveyor.accounts.authenticate`). Missing, malformed or unknown → 401 with
``WWW-Authenticate: Bearer``. Routes then read and write only rows whose ``owner`` is the
account's name; another owner's record, item, album or file answers 404, exactly as one that
does not exist (its existence is never revealed).

Authentication comes first, before any byte of the body is read (:class:`AuthMiddleware`):
FastAPI parses a JSON body before it resolves a route's dependencies, so a check done only as a
dependency would answer an anonymous, malformed request with 400 — telling a stranger how the
route parses — and would let it make the server read a body. The dependency
:func:`current_account` then hands the account the middleware found to the route.
"""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from conveyor.accounts import Account, authenticate
from conveyor.api.errors import ApiError, error_response, unavailable_response
from conveyor.api.state import ApiState, State
from conveyor.db import outage
from conveyor.error_codes import ErrorCode

__all__ = ["AuthMiddleware", "Owner", "current_account"]

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A token from `conveyor tokens create USER`.",
)
_SCOPE_KEY = "conveyor.account"


def _missing() -> ApiError:
    return ApiError(
        ErrorCode.UNAUTHORIZED,
        "this route needs a bearer token: Authorization: Bearer <token>",
        headers={"WWW-Authenticate": 'Bearer realm="conveyor"'},
    )


def _unknown() -> ApiError:
    return ApiError(
        ErrorCode.INVALID_TOKEN,
        "the bearer token is unknown or revoked",
        headers={"WWW-Authenticate": 'Bearer realm="conveyor", error="invalid_token"'},
    )


def _bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credentials = bytes(value).decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


def _is_api(scope: Scope) -> bool:
    path = str(scope["path"])
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        path = path[len(root) :]
    # /v1: the OpenAI-compatible routes, on the same tokens.
    return path in ("/api", "/v1") or path.startswith(("/api/", "/v1/"))


class AuthMiddleware:
    """Authenticate every ``/api`` and ``/v1`` request before the route (or anything else)
    reads its body.

    The account is left in the request scope for :func:`current_account`; a refusal is the one
    JSON error shape with 401. Other paths (``/healthz``, ``/metrics``, the schema) pass.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_api(scope):
            await self.app(scope, receive, send)
            return
        token = _bearer_token(scope)
        refusal = _missing()
        if token is not None:
            state: ApiState = scope["app"].state.conveyor
            runtime = state.runtime
            try:
                account = await anyio.to_thread.run_sync(
                    authenticate, runtime.engine, runtime.clock, token
                )
            except Exception as exc:
                # Outside the app's error handlers: an outage is answered here, once logged.
                if not outage.DATABASE.failed(exc, "API"):
                    raise
                await unavailable_response()(scope, receive, send)
                return
            outage.DATABASE.succeeded()
            if account is not None:
                scope.setdefault("state", {})[_SCOPE_KEY] = account
                await self.app(scope, receive, send)
                return
            refusal = _unknown()
        response = error_response(refusal.code, refusal.message, headers=refusal.headers)
        await response(scope, receive, send)


def current_account(
    request: Request,
    state: State,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Account:
    """The account the request's bearer token acts for (found by :class:`AuthMiddleware`).

    Raises:
        ApiError: 401 when the token is missing or unknown.
    """
    found = request.scope.get("state", {}).get(_SCOPE_KEY)
    if isinstance(found, Account):
        return found
    # Only reached when the middleware is not installed (an app assembled by hand).
    if credentials is None:
        raise _missing()
    runtime = state.runtime
    account = authenticate(runtime.engine, runtime.clock, credentials.credentials)
    if account is None:
        raise _unknown()
    return account


Owner = Annotated[Account, Depends(current_account)]
