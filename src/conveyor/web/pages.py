"""Rendering: the package's Jinja2 templates, and the security headers every page carries."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import Response

from conveyor import __version__
from conveyor.web.auth import current_viewer
from conveyor.web.queries import PLACE_LIMIT
from conveyor.web.words import duration_words, halt_words, person_words, stage_words

__all__ = ["PAGE_HEADERS", "render"]

# Scripts and styles come only from this server (no inline script, no CDN); pages are never
# framed by another site.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; "
        "style-src 'self'; script-src 'self'; connect-src 'self'; object-src 'none'; "
        "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_env = Environment(
    loader=PackageLoader("conveyor.web", "templates"),
    autoescape=select_autoescape(("html",)),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.globals.update(
    version=__version__,
    stage_words=stage_words,
    halt_words=halt_words,
    duration_words=duration_words,
    person_words=person_words,
    place_limit=PLACE_LIMIT,
)
_templates = Jinja2Templates(env=_env)


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, *, status: int = 200
) -> Response:
    """The template ``name`` with ``context`` plus the signed-in ``viewer`` (or None)."""
    state = request.app.state.conveyor
    ctx = {
        "viewer": current_viewer(request, state),
        # The page's upload queue sends no more at once than the server lets one owner.
        "upload_slots": state.runtime.settings.api.uploads_per_owner,
        **(context or {}),
    }
    response = _templates.TemplateResponse(request, name, ctx, status_code=status)
    response.headers.update(PAGE_HEADERS)
    return response
