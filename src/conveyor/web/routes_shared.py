"""Shared albums in the pages: the owner's share panel (share, stop sharing, links), and a
link's own pages, which need no account.

A link opens ``/s/<token>``: the album's grid, each item's viewer, their files and the album's
live updates, all under ``/s/<token>/``, and nothing else (no other page answers without a
session). An expired or revoked link answers 404 on every one of them, and its open live
stream ends within a few seconds.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import anyio.to_thread
from fastapi import APIRouter, Form, Header, Path, Query, Request
from fastapi.responses import RedirectResponse, StreamingResponse
from starlette.responses import Response

from conveyor.api.objects import album_file_response
from conveyor.api.state import ApiState, State
from conveyor.db.ids import ALBUM_EVENT
from conveyor.errors import NotFound, RejectedInput
from conveyor.kinds import ShareRole
from conveyor.limits import LINK_LABEL, USER_NAME
from conveyor.media import queries as media_queries
from conveyor.media import sharing
from conveyor.media.sharing import Access
from conveyor.web.auth import Csrf
from conveyor.web.ids import AlbumId, ItemId, LinkId
from conveyor.web.pages import render
from conveyor.web.routes_albums import album_response, viewer_response
from conveyor.web.streams import album_reader, page_stream_response, start_point
from conveyor.web.views import item_status

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

Token = Annotated[str, Path(min_length=1, max_length=100)]
#: How long a link may be made to last from the page (seconds; the form offers these).
EXPIRIES = frozenset({"", "86400", "604800", "2592000"})


def _panel(album_id: int, error: str | None = None) -> RedirectResponse:
    query = f"?share_error={quote(error)}" if error else ""
    return RedirectResponse(f"/albums/{album_id}{query}#sharing", status_code=303)


@router.post("/albums/{album_id}/shares")
def share(
    state: State,
    viewer: Csrf,
    album_id: AlbumId,
    user: Annotated[str, Form(max_length=USER_NAME.longest)] = "",
    role: Annotated[str, Form(max_length=20)] = "viewer",
) -> Response:
    """Share your album with a user (again: change their role); back to its panel."""
    runtime = state.runtime
    try:
        chosen = ShareRole(role)
    except ValueError:
        return _panel(album_id, f"{role!r} is not a role: viewer or contributor")
    try:
        sharing.share_album(
            runtime.engine, runtime.clock, album_id, owner=viewer.name, user=user, role=chosen
        )
    except RejectedInput as exc:
        return _panel(album_id, str(exc))
    except NotFound as exc:
        with runtime.engine.connect() as conn:
            sharing.owned_album(conn, album_id, viewer.name)  # not yours: 404, not a panel
        return _panel(album_id, str(exc))
    return _panel(album_id)


@router.post("/albums/{album_id}/unshare")
def unshare(
    state: State,
    viewer: Csrf,
    album_id: AlbumId,
    user: Annotated[str, Form(max_length=USER_NAME.longest)] = "",
) -> Response:
    """Stop sharing your album with a user."""
    sharing.unshare_album(state.runtime.engine, album_id, owner=viewer.name, user=user)
    return _panel(album_id)


@router.post("/albums/{album_id}/links")
def create_link(
    request: Request,
    state: State,
    viewer: Csrf,
    album_id: AlbumId,
    label: Annotated[str, Form(max_length=LINK_LABEL.longest)] = "",
    expires: Annotated[str, Form(max_length=20)] = "",
) -> Response:
    """A new view-only link, shown once on the album page that answers."""
    runtime = state.runtime
    if expires not in EXPIRIES:
        return _panel(album_id, "choose when the link expires from the list")
    problem = LINK_LABEL.problem(label)
    if problem is not None:
        return _panel(album_id, f"the note {problem}")
    issued = sharing.create_link(
        runtime.engine,
        runtime.clock,
        album_id,
        owner=viewer.name,
        expires_in=float(expires) if expires else None,
        label=label,
    )
    with runtime.engine.connect() as conn:
        access = sharing.owned_album(conn, album_id, viewer.name)
    return album_response(request, state, access, new_link=f"/s/{issued.token}")


@router.post("/albums/{album_id}/links/{link_id}/revoke")
def revoke_link(state: State, viewer: Csrf, album_id: AlbumId, link_id: LinkId) -> Response:
    """Revoke a link of your album: its pages answer 404 from now on."""
    sharing.revoke_link(state.runtime.engine, album_id, link_id, owner=viewer.name)
    return _panel(album_id)


def _link(state: ApiState, token: str) -> Access:
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        return sharing.link_access(conn, token, runtime.clock.now())


def _base(token: str) -> str:
    return f"/s/{token}"


def _linked_item(state: ApiState, token: str, item_id: int) -> tuple[Access, dict[str, object]]:
    access = _link(state, token)
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        row = media_queries.item_by_id(conn, item_id)
        if row is None or int(row["album_id"]) != access.album_id:
            raise NotFound(f"item {item_id} does not exist")
        now = runtime.clock.now()
        it = item_status(conn, runtime.media, item_id, None, now, base=_base(token), link=True)
    return access, it


@router.get("/s/{token}")
def link_album(
    request: Request,
    state: State,
    token: Token,
    before: Annotated[str | None, Query(max_length=60)] = None,
) -> Response:
    """The album a link shows: its grid, live, with no account."""
    access = _link(state, token)
    return album_response(request, state, access, base=_base(token), before=before)


@router.get("/s/{token}/items/{item_id}")
def link_item(request: Request, state: State, token: Token, item_id: ItemId) -> Response:
    """The viewer of a photo or video of the linked album."""
    access = _link(state, token)
    return viewer_response(request, state, item_id, access, base=_base(token))


@router.get("/s/{token}/items/{item_id}/tile")
def link_tile(request: Request, state: State, token: Token, item_id: ItemId) -> Response:
    """One tile of the linked album's grid (swapped in when the item changes)."""
    _access, it = _linked_item(state, token, item_id)
    return render(request, "_item_tile.html", {"it": it, "role": "link", "base": _base(token)})


@router.get("/s/{token}/items/{item_id}/view")
def link_view(request: Request, state: State, token: Token, item_id: ItemId) -> Response:
    """The live part of the linked item's viewer."""
    _access, it = _linked_item(state, token, item_id)
    return render(request, "_item_view.html", {"it": it, "role": "link", "base": _base(token)})


@router.get("/s/{token}/events")
async def link_events(
    state: State,
    token: Token,
    last_event_id: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    last_event_id_header: Annotated[
        str | None, Header(alias="Last-Event-ID", max_length=40)
    ] = None,
) -> StreamingResponse:
    """The linked album's live events (M5), as its owner's page gets them; the stream ends
    once the link is revoked or expires."""
    broadcast = state.broadcast

    def start() -> tuple[Access, int]:
        access = _link(state, token)
        return access, start_point(
            last_event_id_header,
            last_event_id,
            lambda: broadcast.latest_id(access.album_id),
            ALBUM_EVENT,
        )

    def still_allowed() -> bool:
        try:
            _link(state, token)
        except NotFound:
            return False
        return True

    access, first = await anyio.to_thread.run_sync(start)
    assert access.link_id is not None
    return page_stream_response(
        state,
        -access.link_id,  # a link's streams, counted apart from every session's
        album_reader(broadcast, access.album_id, link=True),
        first,
        poll_interval=broadcast.poll_interval,
        still_allowed=still_allowed,
    )


@router.head("/s/{token}/files/{key:path}")
@router.get("/s/{token}/files/{key:path}")
def link_file(
    request: Request, state: State, token: Token, key: Annotated[str, Path(max_length=255)]
) -> Response:
    """An object of an item of the linked album (ETag, Range), as in the API."""
    access = _link(state, token)
    return album_file_response(request, state, key, access.album_id)
