"""Albums: the list (with the albums shared with you), the live grid, uploads, the viewer,
resume; files behind the session.

An album shared with the signed-in user answers as their own does, within their role: a
viewer sees the grid, the viewer and the live updates; a contributor also uploads. The owner's
controls (the share panel, deleting, resume) are the owner's only; to anyone else an album or
item outside what was shared answers 404. :func:`album_response` and :func:`viewer_response`
also serve a link's pages (``routes_shared``), under the link's own address."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import quote

import anyio.to_thread
from fastapi import APIRouter, Form, Header, Path, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from starlette.responses import Response

from conveyor.accounts import session_active
from conveyor.api.objects import owned_file_response
from conveyor.api.state import ApiState, State
from conveyor.api.uploads import Upload, keep_duplicate_chosen, receive_upload
from conveyor.db.ids import ALBUM_EVENT
from conveyor.errors import Conflict, Duplicate, NotFound, RejectedInput
from conveyor.limits import ALBUM_NAME
from conveyor.media import albums as album_views
from conveyor.media import queries as media_queries
from conveyor.media.intake import accept_media
from conveyor.media.sharing import (
    ADD,
    LINK,
    Access,
    album_access,
    item_access,
    list_links,
    list_shares,
    owned_album,
    shared_with,
)
from conveyor.pipeline import resume
from conveyor.web import queries
from conveyor.web.auth import Csrf, CsrfHeader, Viewer
from conveyor.web.ids import AlbumId, ItemId
from conveyor.web.keyset import cursor_text, parse_cursor
from conveyor.web.pages import render
from conveyor.web.streams import album_reader, page_stream_response, start_point
from conveyor.web.views import item_status, item_statuses

__all__ = ["GRID_PAGE", "album_response", "router", "viewer_response"]

router = APIRouter(include_in_schema=False)

GRID_PAGE = 60

# The one text part an album upload may carry before its file: ``keep_duplicate=true`` keeps a
# second copy of a file the viewer already has.
KEEP_FIELDS = frozenset({"keep_duplicate"})
"""Tiles a page of the album grid shows (``Older`` continues after the last)."""


def _access(state: ApiState, album_id: int, user: str) -> Access:
    with state.runtime.engine.connect() as conn:
        return album_access(conn, album_id, user)


def _item(state: ApiState, item_id: int, user: str) -> dict[str, Any]:
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        item_access(conn, item_id, user)
        return item_status(conn, state.runtime.media, item_id, None, runtime.clock.now())


@router.get("/albums")
def albums_page(
    request: Request,
    state: State,
    viewer: Viewer,
    error: Annotated[str | None, Query(max_length=300)] = None,
    deleted: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    """Your albums, with a form to create one, and the albums others share with you."""
    with state.runtime.engine.connect() as conn:
        albums = album_views.list_albums(conn, viewer.name)
        shared = shared_with(conn, viewer.name)
    return render(
        request,
        "albums.html",
        {"albums": albums, "shared": shared, "error": error, "deleted": deleted},
    )


@router.post("/albums")
def albums_create(
    state: State, viewer: Csrf, name: Annotated[str, Form(max_length=ALBUM_NAME.longest)] = ""
) -> Response:
    """Create an album and open it."""
    runtime = state.runtime
    try:
        album_id = album_views.create_album(
            runtime.engine, runtime.clock, owner=viewer.name, name=name
        )
    except (RejectedInput, Conflict) as exc:
        return RedirectResponse(f"/albums?error={quote(str(exc))}", status_code=303)
    return RedirectResponse(f"/albums/{album_id}", status_code=303)


@router.get("/albums/{album_id}")
def album_page(
    request: Request,
    state: State,
    viewer: Viewer,
    album_id: AlbumId,
    before: Annotated[str | None, Query(max_length=60)] = None,
    deleted: Annotated[str | None, Query(max_length=300)] = None,
    share_error: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    """The grid, newest first, :data:`GRID_PAGE` tiles a page (``?before=`` the cursor of the
    last tile shown, keyset); tiles appear and fill in from the album's live stream. The
    owner's page has the share panel."""
    access = _access(state, album_id, viewer.name)
    return album_response(
        request, state, access, before=before, deleted=deleted, share_error=share_error
    )


def album_response(
    request: Request,
    state: ApiState,
    access: Access,
    *,
    base: str = "",
    before: str | None = None,
    deleted: str | None = None,
    new_link: str | None = None,
    share_error: str | None = None,
) -> Response:
    """The album page as ``access`` may see it: the owner's with the share panel (and a link
    just made, shown this once), a contributor's with uploads, a viewer's or a link holder's
    with the grid only. ``base`` is where the page lives (a link's ``/s/<token>``)."""
    after = parse_cursor(before) if before is not None else None
    album_id = access.album_id
    runtime = state.runtime
    now = runtime.clock.now()
    shares: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    with runtime.engine.connect() as conn:
        last_event_id = media_queries.latest_event_id(conn, album_id)
        rows = queries.album_page(conn, album_id, after=after, limit=GRID_PAGE + 1)
        items = item_statuses(
            conn, runtime.media, rows[:GRID_PAGE], now, base=base, link=access.role == LINK
        )
        total = queries.count_items(conn, album_id)
        if access.is_owner:
            shares = list_shares(conn, album_id, owner=access.owner)
            links = list_links(conn, album_id, owner=access.owner, now=now)
    older = None
    if len(rows) > GRID_PAGE:
        last = rows[GRID_PAGE - 1]
        older = cursor_text(float(last["taken_at"]), int(last["id"]))
    return render(
        request,
        "album.html",
        {
            "album": dict(access.album),
            "role": access.role,
            "base": base,
            "home": base or f"/albums/{album_id}",
            "items": items,
            "total": total,
            "older": older,
            "first_page": after is None,
            "last_event_id": last_event_id,
            "deleted": deleted,
            "shares": shares,
            "links": links,
            "new_link": new_link,
            "share_error": share_error if access.is_owner else None,
        },
    )


@router.post("/albums/{album_id}/upload")
async def album_upload(
    request: Request, state: State, viewer: CsrfHeader, album_id: AlbumId
) -> Response:
    """One photo or video per request: 201 ``{"id", "url"}``; content the viewer already has
    (same SHA-256, any album) is not stored again: 200 ``{"id", "url", "duplicate": true}``
    naming the item that holds it."""
    runtime = state.runtime
    max_bytes = runtime.settings.api.max_upload_bytes
    access = await anyio.to_thread.run_sync(_access, state, album_id, viewer.name)
    if not access.may_add:  # a viewer: a stranger's 404, saying they may not add to it
        raise access.refused(ADD)

    def accept(chunks: Iterator[bytes], upload: Upload) -> int:
        return accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            chunks,
            album_id=album_id,
            owner=access.owner,
            added_by=viewer.name,
            original_name=upload.filename,
            max_pixels=runtime.settings.media.max_pixels,
            max_bytes=max_bytes,
            keep_duplicate=keep_duplicate_chosen(upload),
        )

    try:
        item_id = await receive_upload(
            request, accept, max_bytes=max_bytes, owner=viewer.name, fields=KEEP_FIELDS
        )
    except Duplicate as exc:
        url = f"/items/{exc.existing_id}"
        return JSONResponse({"id": exc.existing_id, "url": url, "duplicate": True})
    return JSONResponse({"id": item_id, "url": f"/items/{item_id}"}, status_code=201)


@router.get("/albums/{album_id}/events")
async def album_events(
    state: State,
    viewer: Viewer,
    album_id: AlbumId,
    last_event_id: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    last_event_id_header: Annotated[
        str | None, Header(alias="Last-Event-ID", max_length=40)
    ] = None,
) -> StreamingResponse:
    """The album's live events (M5) for the page, resumable after the last id seen; the
    stream ends when the session is signed out or the album is no longer shared with them."""
    broadcast = state.broadcast

    def start_id() -> int:
        _access(state, album_id, viewer.name)
        return start_point(
            last_event_id_header,
            last_event_id,
            lambda: broadcast.latest_id(album_id),
            ALBUM_EVENT,
        )

    def still_allowed() -> bool:
        # Signed in still, and the album still theirs or shared with them (an unshared
        # viewer's page stops following it).
        if not session_active(state.runtime.engine, viewer.session_id):
            return False
        try:
            _access(state, album_id, viewer.name)
        except NotFound:
            return False
        return True

    start = await anyio.to_thread.run_sync(start_id)
    return page_stream_response(
        state,
        viewer.session_id,
        album_reader(broadcast, album_id),
        start,
        poll_interval=broadcast.poll_interval,
        still_allowed=still_allowed,
    )


@router.get("/items/{item_id}/tile")
def item_tile(request: Request, state: State, viewer: Viewer, item_id: ItemId) -> Response:
    """One tile of the grid (swapped in when the item changes)."""
    access = _item_album(state, item_id, viewer.name)
    it = _item(state, item_id, viewer.name)
    return render(request, "_item_tile.html", {"it": it, "role": access.role, "base": ""})


@router.get("/items/{item_id}/view")
def item_view_part(request: Request, state: State, viewer: Viewer, item_id: ItemId) -> Response:
    """The live part of the viewer (swapped in when the item changes)."""
    access = _item_album(state, item_id, viewer.name)
    it = _item(state, item_id, viewer.name)
    return render(request, "_item_view.html", {"it": it, "role": access.role, "base": ""})


def _item_album(state: ApiState, item_id: int, user: str) -> Access:
    with state.runtime.engine.connect() as conn:
        return item_access(conn, item_id, user)[1]


@router.get("/items/{item_id}")
def item_page(request: Request, state: State, viewer: Viewer, item_id: ItemId) -> Response:
    """The viewer: medium/preview image (the original at full size when zoomed), or the video
    with its poster once converted; the previous and next of the album's grid order (arrow
    keys, swipe); it follows the album's live stream and fills in as the variants and playback
    arrive."""
    with state.runtime.engine.connect() as conn:
        access = item_access(conn, item_id, viewer.name)[1]
    return viewer_response(request, state, item_id, access)


def viewer_response(
    request: Request, state: ApiState, item_id: int, access: Access, *, base: str = ""
) -> Response:
    """The viewer of an item of ``access``'s album (checked by the caller); ``base`` as for
    :func:`album_response`."""
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        # The stream's start is read first: a change after it reaches the page (maybe twice
        # shown, never missed).
        item_row = media_queries.item_by_id(conn, item_id)
        if item_row is None or int(item_row["album_id"]) != access.album_id:
            raise NotFound(f"item {item_id} does not exist")
        last_event_id = media_queries.latest_event_id(conn, access.album_id)
        now = runtime.clock.now()
        item = item_status(
            conn, runtime.media, item_id, None, now, base=base, link=access.role == LINK
        )
        newer, older = queries.album_neighbours(conn, item_row)
    return render(
        request,
        "viewer.html",
        {
            "it": item,
            "album": dict(access.album),
            "role": access.role,
            "base": base,
            "home": base or f"/albums/{access.album_id}",
            "last_event_id": last_event_id,
            "newer": newer,
            "older": older,
        },
    )


@router.post("/items/{item_id}/resume")
def item_resume(state: State, viewer: Csrf, item_id: ItemId) -> Response:
    """Resume a halted photo or video of your album (P9)."""
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        item = item_access(conn, item_id, viewer.name)[0]
        owned_album(conn, int(item["album_id"]), viewer.name)
    with contextlib.suppress(Conflict):
        resume(runtime.engine, runtime.media, item_id, clock=runtime.clock)
    return RedirectResponse(f"/items/{item_id}", status_code=303)


@router.head("/files/{key:path}")
@router.get("/files/{key:path}")
def file_get(
    request: Request,
    state: State,
    viewer: Viewer,
    key: Annotated[str, Path(max_length=255)],
) -> Response:
    """An object of one of your records or items, or of an item of an album shared with you
    (ETag, Range), as in the API."""
    return owned_file_response(request, state, key, viewer.name)
