"""Search: the recordings whose title, brief, transcript or correction say what was asked."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from conveyor.api.state import State
from conveyor.audio.search import MAX_QUERY, search_records
from conveyor.clock import iso_utc
from conveyor.web.auth import Viewer
from conveyor.web.pages import render

__all__ = ["RESULTS", "router"]

router = APIRouter(include_in_schema=False)

RESULTS = 30
"""Recordings one search shows."""

_WHERE = {
    "title": "in the title",
    "brief": "in the brief",
    "transcript": "said",
    "proofread": "said (your correction)",
}


@router.get("/search")
async def search_page(
    request: Request,
    state: State,
    viewer: Viewer,
    q: Annotated[str, Query(max_length=MAX_QUERY)] = "",
) -> Response:
    """The best matches first, each with its words around the match (matched words marked)
    and, when they were said, a link that plays the recording from that moment."""
    query = q.strip()
    hits = (
        await anyio.to_thread.run_sync(
            lambda: search_records(state.runtime.engine, viewer.name, query, limit=RESULTS)
        )
        if query
        else []
    )
    results = [
        {
            "id": h.record_id,
            "name": h.name,
            "where": _WHERE.get(h.kind, h.kind),
            "parts": h.snippet,
            "start": h.start,
            "at": _clock(h.start) if h.start is not None else None,
            "created_at": iso_utc(h.created_at),
        }
        for h in hits
    ]
    return render(request, "search.html", {"q": query, "results": results})


def _clock(seconds: float) -> str:
    s = int(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
