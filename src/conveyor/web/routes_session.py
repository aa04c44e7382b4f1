"""Sign-in, sign-out and the API token page."""

from __future__ import annotations

import secrets
from functools import partial
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from conveyor.accounts import (
    SignInPaused,
    address_key,
    check_password,
    create_token,
    end_session,
    list_tokens,
    revoke_own_token,
    start_session,
)
from conveyor.api.state import State
from conveyor.clock import iso_utc
from conveyor.limits import TOKEN_LABEL
from conveyor.web.auth import (
    LOGIN_CSRF_COOKIE,
    Csrf,
    Viewer,
    clear_session_cookie,
    current_viewer,
    new_login_csrf,
    set_session_cookie,
)
from conveyor.web.clients import client_address
from conveyor.web.ids import TokenId
from conveyor.web.pages import render

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


def _safe_next(target: str | None) -> str:
    # Only a path of this site: never `//evil.example` or an absolute URL (open redirect).
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/records"
    return target


def _sign_in_page(
    request: Request, next_path: str, *, error: str | None = None, name: str = "", status: int = 200
) -> Response:
    token = secrets.token_urlsafe(24)
    response = render(
        request,
        "sign_in.html",
        {"next": next_path, "error": error, "name": name, "login_csrf": token},
        status=status,
    )
    new_login_csrf(request, response, token)
    return response


@router.get("/sign-in")
def sign_in_form(
    request: Request, state: State, next: Annotated[str | None, Query()] = None
) -> Response:
    """The sign-in form (already signed in: straight on)."""
    if current_viewer(request, state) is not None:
        return RedirectResponse(_safe_next(next), status_code=303)
    return _sign_in_page(request, _safe_next(next))


@router.post("/sign-in")
async def sign_in(
    request: Request,
    state: State,
    username: Annotated[str, Form(max_length=200)] = "",
    password: Annotated[str, Form(max_length=2000)] = "",
    csrf_token: Annotated[str, Form(max_length=200)] = "",
    next: Annotated[str, Form(max_length=2000)] = "/records",
) -> Response:
    """Check the password; on success start a session and go on to ``next``.

    Wrong name or password: the form again with 401 and one message for both (names are not
    revealed). After 5 failures in a row the user's sign-in pauses, and after 20 from one
    client address (:mod:`conveyor.web.clients`) that address's (429, how long it lasts).
    """
    target = _safe_next(next)
    cookie_token = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not csrf_token or not secrets.compare_digest(csrf_token.encode(), cookie_token.encode()):
        return _sign_in_page(
            request,
            target,
            error="The sign-in form had expired; please try again.",
            name=username,
            status=403,
        )
    runtime = state.runtime
    address = address_key(client_address(request, runtime.settings.api.trusted_proxies))
    try:
        signed = await anyio.to_thread.run_sync(
            partial(check_password, address=address),
            runtime.engine,
            runtime.clock,
            username,
            password,
        )
    except SignInPaused as exc:
        return _sign_in_page(
            request,
            target,
            error=f"Too many failed sign-ins. Sign-in is paused; try again in {exc.seconds} s.",
            name=username,
            status=429,
        )
    if signed is None:
        return _sign_in_page(
            request, target, error="Wrong user name or password.", name=username, status=401
        )
    session = await anyio.to_thread.run_sync(
        start_session, runtime.engine, runtime.clock, signed.user_id
    )
    response = RedirectResponse(target, status_code=303)
    set_session_cookie(request, response, session.cookie)
    response.delete_cookie(LOGIN_CSRF_COOKIE, path="/sign-in")
    return response


@router.post("/sign-out")
def sign_out(request: Request, state: State, viewer: Csrf) -> Response:
    """End the session; its cookie signs nobody in from now on."""
    end_session(state.runtime.engine, viewer.session_id)
    response = RedirectResponse("/sign-in", status_code=303)
    clear_session_cookie(request, response)
    return response


def _tokens_page(
    request: Request, state: State, viewer: Viewer, new_token: str | None = None
) -> Response:
    tokens = [
        {
            **t,
            "created": iso_utc(t["created_at"]),
            "last_used": iso_utc(t["last_used_at"]),
        }
        for t in list_tokens(state.runtime.engine, viewer.name)
    ]
    return render(request, "tokens.html", {"tokens": tokens, "new_token": new_token})


@router.get("/tokens")
def tokens_page(request: Request, state: State, viewer: Viewer) -> Response:
    """Your API tokens (never their secrets)."""
    return _tokens_page(request, state, viewer)


@router.post("/tokens")
def tokens_create(
    request: Request,
    state: State,
    viewer: Csrf,
    label: Annotated[str, Form(max_length=TOKEN_LABEL.longest)] = "",
) -> Response:
    """A new token, shown once on the page that answers."""
    issued = create_token(
        state.runtime.engine, state.runtime.clock, viewer.name, label=label.strip() or None
    )
    return _tokens_page(request, state, viewer, new_token=issued.token)


@router.post("/tokens/{token_id}/revoke")
def tokens_revoke(
    state: State,
    viewer: Csrf,
    token_id: TokenId,
) -> Response:
    """Revoke one of your tokens (another user's answers 404)."""
    revoke_own_token(state.runtime.engine, viewer.user_id, token_id)
    return RedirectResponse("/tokens", status_code=303)
