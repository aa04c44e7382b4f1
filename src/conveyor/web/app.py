"""The web app on the API's app: one process, the same owners, the same workers.

:func:`create_app` builds the API (:func:`conveyor.api.app.create_app`) and adds the pages at
``/``, the package's static files at ``/static`` (no CDN, no build step), and error pages: a
refusal on a page a person opened is an HTML page with the same status; the API and script
requests keep the JSON error shape.

Pages::

    GET  /sign-in, POST /sign-in, POST /sign-out     sign-in (argon2id), sign-out
    GET  /records[?show=&stage=&before=ID]           your recordings, live counts, filters, paged
    GET  /records/{id}                               player, live transcript, edits, exports
    POST /records/upload                             one recording (language, hints, channels)
    GET  /search?q=                                  recordings that say it, best first
    GET  /vocabulary, POST /vocabulary               your standing names and terms
    GET  /albums, /albums/{id}[?before=CURSOR]       albums, the live grid (keyset pages)
    GET  /items/{id}                                 the viewer, filled in live
    POST /albums/{id}/shares, /unshare, /links, /links/{id}/revoke
                                                     the owner's share panel
    GET  /s/{token}, /s/{token}/items/{id}           a link's album and viewer (no account)
    GET  /tokens                                     create and revoke API tokens
    GET  /operator[?domain=&before=CURSOR]           admins: halted of every owner, backlog
    GET, POST /records/{id}/delete, /items/{id}/delete, /albums/{id}/delete
                                                     what goes, then delete it for good
    POST /albums/{id}/items/delete                   several items chosen in the grid
    OPTIONS, POST /uploads; HEAD, PATCH /uploads/{id}  resumable uploads (tus 1.0.0)

Fragments the pages' script swaps in live: ``/records/{id}/row``, ``/records/{id}/status``,
``/records/{id}/text``, ``/records/counts``, ``/items/{id}/tile``, ``/items/{id}/view`` (and a
link's own ``/s/{token}/items/{id}/tile`` and ``/view``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from conveyor.api.app import create_app as create_api
from conveyor.api.errors import error_response
from conveyor.error_codes import ErrorCode
from conveyor.runtime import Runtime
from conveyor.web import (
    routes_albums,
    routes_delete,
    routes_operator,
    routes_records,
    routes_resumable,
    routes_search,
    routes_session,
    routes_shared,
    routes_vocabulary,
)
from conveyor.web.auth import CsrfRefused, SignInRequired, sign_in_url
from conveyor.web.gate import WebGate
from conveyor.web.pages import render

__all__ = ["create_app"]

Handler = Callable[[Request, Exception], Awaitable[Response]]

_TITLES = {
    400: "That request was not understood",
    403: "Refused",
    404: "Not found",
    409: "That cannot be done now",
    413: "Too large",
    415: "Not a file we can take",
    422: "Something in the form is not right",
    500: "Something went wrong on our side",
}


def _is_page(request: Request) -> bool:
    path = request.url.path
    if path.startswith(("/api/", "/healthz", "/metrics", "/docs", "/openapi")):
        return False
    return "text/html" in request.headers.get("accept", "")


def _error_page(request: Request, status: int, message: str) -> Response:
    return render(
        request,
        "error.html",
        {"status": status, "title": _TITLES.get(status, "Error"), "message": message},
        status=status,
    )


def _html_for_pages(handler: Handler) -> Handler:
    """Wrap an API error handler: same status, but an HTML page for a person's request."""

    async def handle(request: Request, exc: Exception) -> Response:
        response = await handler(request, exc)
        if not _is_page(request) or not isinstance(response, JSONResponse):
            return response
        body = json.loads(bytes(response.body))
        message = str(body.get("error", {}).get("message", "error"))
        if response.status_code == 404:
            message = "There is nothing here, or it is not yours."
        return _error_page(request, response.status_code, message)

    return handle


async def _on_sign_in_required(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    if exc.page:
        return RedirectResponse(sign_in_url(exc.next_path), status_code=303)
    return error_response(ErrorCode.UNAUTHORIZED, "sign in first")


async def _on_csrf(request: Request, exc: Exception) -> Response:
    message = f"{exc}. Reload the page and try again."
    if _is_page(request):
        return _error_page(request, 403, message)
    return error_response(ErrorCode.CSRF, message)


def create_app(runtime: Runtime, *, run_workers: bool = True) -> FastAPI:
    """The API and the web app in one FastAPI app (see :func:`conveyor.api.app.create_app`)."""
    app = create_api(runtime, run_workers=run_workers)
    handlers: dict[Any, Handler] = dict(app.exception_handlers)
    for exc_class, handler in handlers.items():
        app.add_exception_handler(exc_class, _html_for_pages(handler))
    app.add_exception_handler(SignInRequired, _on_sign_in_required)
    app.add_exception_handler(CsrfRefused, _on_csrf)
    # Outermost: headers bounded, and a page's form checked for a session before its body.
    app.add_middleware(WebGate)
    app.mount("/static", StaticFiles(packages=[("conveyor.web", "static")]), name="static")
    app.include_router(routes_session.router)
    app.include_router(routes_records.router)
    app.include_router(routes_vocabulary.router)
    app.include_router(routes_albums.router)
    app.include_router(routes_shared.router)
    app.include_router(routes_operator.router)
    app.include_router(routes_delete.router)
    app.include_router(routes_search.router)
    app.include_router(routes_resumable.router)
    return app
