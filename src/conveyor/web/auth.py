"""Who is signed in, and the CSRF check every state-changing request of the web app passes.

A browser holds one session cookie (:data:`SESSION_COOKIE`: HttpOnly, SameSite=Lax, Secure
when the page is served over HTTPS). Pages without a session redirect to the sign-in page;
fragments, uploads and live streams answer 401 instead.

CSRF (synchronizer token): every form carries the session's token in a hidden
``csrf_token`` field and every script request sends it in ``X-CSRF-Token``; a POST without the
right one is refused with 403 before it does anything. A request whose ``Origin`` names
another origin is refused too: scheme, host and port must all be this site's (the scheme is
``X-Forwarded-Proto`` when a trusted proxy, ``[api] trusted_proxies``, sent the request).
The sign-in form, which has no session yet, is protected by a double-submit cookie
(:data:`LOGIN_CSRF_COOKIE`) instead.
"""

from __future__ import annotations

import secrets
from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, Request, Response

from conveyor.accounts import SessionAccount, session_account
from conveyor.accounts.sessions import SESSION_LIFETIME
from conveyor.api.state import State
from conveyor.errors import NotFound
from conveyor.web.clients import from_trusted_proxy

__all__ = [
    "CSRF_HEADER",
    "LOGIN_CSRF_COOKIE",
    "SESSION_COOKIE",
    "Csrf",
    "CsrfHeader",
    "CsrfRefused",
    "SignInRequired",
    "Viewer",
    "check_csrf",
    "check_csrf_header",
    "clear_session_cookie",
    "current_viewer",
    "new_login_csrf",
    "require_admin",
    "require_viewer",
    "set_session_cookie",
    "sign_in_url",
]

SESSION_COOKIE = "conveyor_session"
LOGIN_CSRF_COOKIE = "conveyor_login_csrf"
CSRF_HEADER = "X-CSRF-Token"
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class SignInRequired(Exception):
    """No valid session: a page redirects to the sign-in page, anything else answers 401."""

    def __init__(self, next_path: str, page: bool) -> None:
        self.next_path = next_path
        self.page = page
        super().__init__("sign in first")


class CsrfRefused(Exception):
    """A state-changing request without the session's CSRF token (or from another origin)."""


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(request: Request, response: Response, cookie: str) -> None:
    """Hand the browser its session cookie: HttpOnly, SameSite=Lax, Secure over HTTPS."""
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=int(SESSION_LIFETIME),
        path="/",
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )


def clear_session_cookie(request: Request, response: Response) -> None:
    """Make the browser forget its session cookie."""
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=_secure(request)
    )


def new_login_csrf(request: Request, response: Response, token: str) -> None:
    """Set the sign-in form's double-submit ``token`` (also in the form's hidden field)."""
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        token,
        max_age=3600,
        path="/sign-in",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def current_viewer(request: Request, state: State) -> SessionAccount | None:
    """The signed-in user of ``request``, or None."""
    cached: SessionAccount | None = getattr(request.state, "viewer", None)
    if cached is not None:
        return cached
    cookie = request.cookies.get(SESSION_COOKIE, "")
    viewer = session_account(state.runtime.engine, state.runtime.clock, cookie) if cookie else None
    request.state.viewer = viewer
    return viewer


def _wants_page(request: Request) -> bool:
    return request.method == "GET" and "text/html" in request.headers.get("accept", "")


def require_viewer(request: Request, state: State) -> SessionAccount:
    """The signed-in user; otherwise :class:`SignInRequired`."""
    viewer = current_viewer(request, state)
    if viewer is None:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInRequired(path, _wants_page(request))
    return viewer


Viewer = Annotated[SessionAccount, Depends(require_viewer)]


def require_admin(viewer: Viewer) -> SessionAccount:
    """The signed-in user if an admin; others are told the page does not exist."""
    if not viewer.is_admin:
        raise NotFound("no such page")
    return viewer


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` with the scheme's default port filled in; None if unreadable."""
    scheme = scheme.lower()
    if scheme not in _DEFAULT_PORTS or not netloc or "@" in netloc:
        return None
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return (scheme, (parts.hostname or "").lower(), port)


def _own_scheme(request: Request) -> str:
    trusted = request.app.state.conveyor.runtime.settings.api.trusted_proxies
    forwarded = request.headers.get("x-forwarded-proto")
    if forwarded and from_trusted_proxy(request, trusted):
        # Behind a trusted proxy: the scheme the browser used (the proxy appends its hop last).
        return forwarded.split(",")[-1].strip()
    return request.url.scheme


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        # Browsers send Origin on every cross-site POST; a missing one is a same-site form
        # of an older browser, or not a browser at all (no cookie confusion to exploit).
        return origin is None
    parts = urlsplit(origin)
    theirs = _origin(parts.scheme, parts.netloc)
    ours = _origin(_own_scheme(request), request.headers.get("host", ""))
    return theirs is not None and theirs == ours


def _check(request: Request, viewer: SessionAccount, sent: str | None) -> SessionAccount:
    if not _same_origin(request):
        raise CsrfRefused("the request came from another site")
    if not sent or not secrets.compare_digest(sent.encode(), viewer.csrf_token.encode()):
        raise CsrfRefused("the form's security token is missing or wrong")
    return viewer


async def check_csrf(request: Request, viewer: Viewer) -> SessionAccount:
    """The signed-in user, after a form or script request proved it comes from our pages.

    The token is read from ``X-CSRF-Token`` or else the form's ``csrf_token`` field.

    Raises:
        CsrfRefused: no or a wrong CSRF token, or an ``Origin`` of another site.
    """
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(_FORM_TYPES):
        form = await request.form()
        value = form.get("csrf_token")
        sent = value if isinstance(value, str) else None
    return _check(request, viewer, sent)


def check_csrf_header(request: Request, viewer: Viewer) -> SessionAccount:
    """As :func:`check_csrf`, from the ``X-CSRF-Token`` header only (uploads: the body is
    streamed to storage, never parsed as a form first)."""
    return _check(request, viewer, request.headers.get(CSRF_HEADER))


Csrf = Annotated[SessionAccount, Depends(check_csrf)]
CsrfHeader = Annotated[SessionAccount, Depends(check_csrf_header)]


def sign_in_url(next_path: str) -> str:
    """The sign-in page that returns to ``next_path``."""
    return f"/sign-in?next={quote(next_path, safe='/')}"
