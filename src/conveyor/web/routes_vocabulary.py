"""Your standing vocabulary: names and terms given to the recognizer for every recording."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

import anyio.to_thread
from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from conveyor.api.state import State
from conveyor.audio.vocabulary import MAX_HINTS, owner_vocabulary, set_owner_vocabulary
from conveyor.errors import RejectedInput
from conveyor.web.auth import Csrf, Viewer
from conveyor.web.pages import render

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


def _back(*, saved: str | None = None, error: str | None = None) -> Response:
    query = urlencode({k: v for k, v in (("saved", saved), ("error", error)) if v})
    return RedirectResponse(f"/vocabulary{'?' + query if query else ''}", 303)


@router.get("/vocabulary")
def vocabulary_page(
    request: Request,
    state: State,
    viewer: Viewer,
    saved: Annotated[str | None, Query(max_length=20)] = None,
    error: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    """The vocabulary form, with what is stored now (``GET /api/vocabulary``)."""
    with state.runtime.engine.connect() as conn:
        hints = owner_vocabulary(conn, viewer.name)
    return render(
        request,
        "vocabulary.html",
        {"hints": hints, "max_hints": MAX_HINTS, "saved": saved, "error": error},
    )


@router.post("/vocabulary")
async def vocabulary_form(
    state: State,
    viewer: Csrf,
    # Longer than MAX_HINTS on purpose: whitespace collapses first, and a longer text is refused
    # with a message on the page rather than a bare 422.
    hints: Annotated[str, Form(max_length=20_000)] = "",
) -> Response:
    """Replace your vocabulary (as ``PUT /api/vocabulary``); an empty text removes it.

    303 back to ``/vocabulary`` with ``saved=vocabulary`` or ``saved=removed``, or with
    ``error=…`` (over 1,000 characters, control characters) and nothing changed.
    """
    runtime = state.runtime
    try:
        stored = await anyio.to_thread.run_sync(
            set_owner_vocabulary, runtime.engine, runtime.clock, viewer.name, hints
        )
    except RejectedInput as exc:
        return _back(error=str(exc))
    return _back(saved="vocabulary" if stored is not None else "removed")
