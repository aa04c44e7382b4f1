"""``/api/albums`` and ``/api/items``: albums, photo and video uploads, the live stream (M1-M5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from starlette.background import BackgroundTask

from conveyor.api.auth import Owner
from conveyor.api.headers import last_event_id as parse_last_event_id
from conveyor.api.idempotency import IDEMPOTENCY_KEY, REPLAYED, IdempotentUpload
from conveyor.api.ids import AlbumEventAfter, AlbumId, ItemId
from conveyor.api.schemas import (
    PLAIN_TEXT,
    Album,
    AlbumCreate,
    AlbumDetail,
    ErrorBody,
    Item,
    UploadedItem,
)
from conveyor.api.sse import album_stream
from conveyor.api.state import ApiState, State
from conveyor.api.uploads import (
    KEEP_DUPLICATE,
    Upload,
    keep_duplicate_chosen,
    receive_upload,
    sent_name,
    upload_responses,
)
from conveyor.db.ids import ALBUM_EVENT
from conveyor.errors import Duplicate, NotFound
from conveyor.media import albums as views
from conveyor.media import queries
from conveyor.media.deletion import delete_album, delete_item
from conveyor.media.intake import accept_media
from conveyor.media.sharing import (
    Access,
    album_access,
    contributable,
    item_access,
    may_delete,
    owned_album,
)
from conveyor.pipeline import resume

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["albums"])


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No or unknown bearer token."},
    404: {
        "model": ErrorBody,
        "description": "No such album or item of yours or shared with you (or not yours to "
        "change: a viewer's upload, anyone's but the owner's resume).",
    },
    422: {"model": ErrorBody, "description": "Invalid fields."},
}

_MEDIA_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary"}},
            },
            "encoding": {"file": {"contentType": "application/octet-stream"}},
        },
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    },
    "description": "A photo or video: a multipart form with a `file` part, or the raw file.",
}


def _album_links(album_id: int) -> dict[str, str]:
    base = f"/api/albums/{album_id}"
    return {"self": base, "items": f"{base}/items", "events": f"{base}/events"}


def _album(view: dict[str, Any], role: str = "owner") -> dict[str, Any]:
    return {
        "id": view["id"],
        "owner": view["owner"],
        "name": view["name"],
        "item_count": view["items"],
        "created_at": view["created_at"],
        "role": role,
        "links": _album_links(int(view["id"])),
    }


def _item(view: dict[str, Any]) -> dict[str, Any]:
    roles = {
        role: {**obj, "url": f"/api/files/{obj['key']}"} for role, obj in view["roles"].items()
    }
    return {
        **view,
        "roles": roles,
        "links": {"self": f"/api/items/{view['id']}", "album": f"/api/albums/{view['album_id']}"},
    }


def _contributable(conn: Connection, album_id: int, user: str) -> Access:
    """The album ``user`` may add to (theirs, or shared with them as a contributor); a viewer
    gets a stranger's 404, told they may not add to it."""
    return contributable(conn, album_id, user)


def _item_of(state: ApiState, item_id: int, user: str) -> dict[str, Any]:
    """The item when ``user`` may see it (theirs, or in an album shared with them)."""
    with state.runtime.engine.connect() as conn:
        item_access(conn, item_id, user)
        return _item(views.item_view(conn, item_id))


@router.post(
    "/albums",
    status_code=201,
    response_model=Album,
    summary="Create an album",
    responses={
        **_ERRORS,
        400: {"model": ErrorBody, "description": "Body is not JSON."},
        409: {"model": ErrorBody, "description": "You have an album of that name."},
        413: {"model": ErrorBody, "description": "A body over 1 MiB."},
    },
)
def create_album(
    response: Response, state: State, owner: Owner, body: AlbumCreate
) -> dict[str, Any]:
    """A new empty album; 409 when you already have one of that name."""
    runtime = state.runtime
    album_id = views.create_album(runtime.engine, runtime.clock, owner=owner.name, name=body.name)
    response.headers["Location"] = f"/api/albums/{album_id}"
    return _album_of(state, album_id, owner.name)


def _album_of(state: ApiState, album_id: int, user: str) -> dict[str, Any]:
    """The album when ``user`` may see it, with their role in it."""
    with state.runtime.engine.connect() as conn:
        access = album_access(conn, album_id, user)
        for view in views.list_albums(conn, access.owner):
            if view["id"] == album_id:
                return _album(view, access.role)
    raise NotFound(f"album {album_id} does not exist")


@router.get("/albums", response_model=list[Album], summary="List your albums", responses=_ERRORS)
def list_albums(state: State, owner: Owner) -> list[dict[str, Any]]:
    """Your albums, oldest first, with item counts."""
    with state.runtime.engine.connect() as conn:
        return [_album(v) for v in views.list_albums(conn, owner.name)]


@router.get(
    "/albums/{album_id}",
    response_model=AlbumDetail,
    summary="An album with its items",
    responses=_ERRORS,
)
def get_album(state: State, owner: Owner, album_id: AlbumId) -> dict[str, Any]:
    """The album (yours or shared with you) and its items (newest first), each with the roles
    that exist now as URLs.

    Absent roles are absent (M2): a photo just uploaded has only `original`.
    """
    album = _album_of(state, album_id, owner.name)
    with state.runtime.engine.connect() as conn:
        last_event_id = queries.latest_event_id(conn, album_id)
        items = [_item(v) for v in views.album_items(conn, album_id)]
    return {**album, "items": items, "last_event_id": last_event_id}


@router.post(
    "/albums/{album_id}/items",
    status_code=201,
    response_model=UploadedItem,
    summary="Upload a photo or video",
    openapi_extra={"requestBody": _MEDIA_BODY},
    responses={
        200: {
            "model": UploadedItem,
            "description": "You already had this content: the item that holds it "
            "(`duplicate: true`, in whichever of your albums), nothing stored.",
        },
        **_ERRORS,
        **upload_responses(
            "The content is not a photo or video.", "Empty, too many pixels, or unreadable."
        ),
    },
)
async def upload_item(
    request: Request,
    response: Response,
    state: State,
    owner: Owner,
    album_id: AlbumId,
    name: Annotated[
        str | None,
        Query(max_length=300, pattern=PLAIN_TEXT, description="The file's name (raw bodies)."),
    ] = None,
    idempotency_key: Annotated[str | None, IDEMPOTENCY_KEY] = None,
    keep_duplicate: Annotated[
        bool,
        Query(description="Keep a second item of content you already have (same SHA-256)."),
    ] = False,
) -> dict[str, Any]:
    """Accept a photo or video into the album: 201 with the item (only `original` so far).

    Content you already have as an item, in any of your albums (same SHA-256), is kept once:
    200 with that item and `duplicate: true`, nothing stored, unless `keep_duplicate=true`.

    A contributor of a shared album adds to it too: the item is the album owner's, with
    `added_by` naming the contributor, and a duplicate is looked for in this album only. A
    viewer's upload is answered 404, as a stranger's.

    Refused with nothing stored: empty (422), too large (413), not a photo or video (415).
    """
    runtime = state.runtime
    max_bytes = runtime.settings.api.max_upload_bytes

    album_owner = owner.name

    def accept(chunks: Iterator[bytes], upload: Upload) -> int:
        return accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            chunks,
            album_id=album_id,
            owner=album_owner,
            added_by=owner.name,
            original_name=sent_name(request) if name else upload.filename,
            max_pixels=runtime.settings.media.max_pixels,
            max_bytes=max_bytes,
            on_insert=once.recorder(runtime.clock),
            keep_duplicate=keep_duplicate_chosen(upload, keep_duplicate),
        )

    def check_album() -> int | None:
        nonlocal album_owner
        with runtime.engine.connect() as conn:
            album_owner = _contributable(conn, album_id, owner.name).owner
        return once.earlier(runtime.engine)

    once = IdempotentUpload(
        idempotency_key, owner=owner.name, scope=f"albums/{album_id}/items", target="item"
    )
    # Before reading the body: another owner's album answers 404 without storing a byte.
    earlier = await anyio.to_thread.run_sync(check_album)
    if earlier is not None:
        response.headers[REPLAYED] = "true"
        item_id = earlier
    else:
        try:
            item_id = await receive_upload(
                request,
                accept,
                max_bytes=max_bytes,
                owner=owner.name,
                fields=frozenset({KEEP_DUPLICATE}),
            )
        except Duplicate as exc:
            # A racing retry with this request's Idempotency-Key finds the content its twin
            # just stored: a replay of that upload, not a duplicate.
            winner = await anyio.to_thread.run_sync(once.earlier, runtime.engine)
            if winner is None:
                response.status_code = 200
                response.headers["Location"] = f"/api/items/{exc.existing_id}"
                item = await anyio.to_thread.run_sync(_item_of, state, exc.existing_id, owner.name)
                return {**item, "duplicate": True}
            item_id = winner
            response.headers[REPLAYED] = "true"
        except IntegrityError as exc:
            # A concurrent retry with the same key created it first, or the album was deleted
            # while the upload arrived.
            await anyio.to_thread.run_sync(check_album)
            item_id = await anyio.to_thread.run_sync(once.winner_of, runtime.engine, exc)
            response.headers[REPLAYED] = "true"
    response.headers["Location"] = f"/api/items/{item_id}"
    item = await anyio.to_thread.run_sync(_item_of, state, item_id, owner.name)
    return {**item, "duplicate": False}


@router.get(
    "/albums/{album_id}/events",
    summary="Live album events (Server-Sent Events)",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": (
                "`text/event-stream`: `id`, `event` (`item.ready`, `item.playback_ready`, "
                "`item.halted`) and JSON `data` per event; `: keep-alive` comments when idle."
            ),
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **_ERRORS,
        400: {"model": ErrorBody, "description": "`Last-Event-ID` is not an event id."},
        429: {
            "model": ErrorBody,
            "description": "The token has `[api] streams_per_token` streams open already.",
            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        },
    },
)
async def album_events(
    state: State,
    owner: Owner,
    album_id: AlbumId,
    last_event_id_header: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            max_length=40,
            description="The last id you received; delivery resumes right after it.",
        ),
    ] = None,
    last_event_id: AlbumEventAfter = None,
) -> StreamingResponse:
    """The album's events as they happen (M5), from the durable outbox; resumable. A user
    the album is shared with gets the same stream as its owner, until it is unshared."""
    runtime = state.runtime
    broadcast = state.broadcast

    def start_ids() -> tuple[int, int, bool]:
        with runtime.engine.connect() as conn:
            mine = album_access(conn, album_id, owner.name).is_owner
        latest = broadcast.latest_id(album_id)
        if last_event_id_header is not None:
            return parse_last_event_id(last_event_id_header, ALBUM_EVENT), latest, mine
        if last_event_id is not None:
            return last_event_id, latest, mine
        return latest, latest, mine

    start, latest, mine = await anyio.to_thread.run_sync(start_ids)
    slot = state.live.open(
        album_id, owner.token_id, latest, shared_with=None if mine else owner.name
    )
    stream = album_stream(
        slot, start, heartbeat=runtime.settings.api.sse_heartbeat, closing=state.closing
    )
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        # Gives the slot back even when the client left before the stream began.
        background=BackgroundTask(slot.close),
    )


@router.get("/items/{item_id}", response_model=Item, summary="A photo or video", responses=_ERRORS)
def get_item(state: State, owner: Owner, item_id: ItemId) -> dict[str, Any]:
    """The item (yours, or in an album shared with you): stage, halt flag and reason, and its
    present roles as URLs (M1-M3)."""
    return _item_of(state, item_id, owner.name)


@router.delete(
    "/items/{item_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a photo or video",
    responses={401: _ERRORS[401], 422: _ERRORS[422]},
)
def delete_item_route(state: State, owner: Owner, item_id: ItemId) -> Response:
    """Delete the item and every object of it; the album's subscribers get `item.deleted`.
    A step running on it writes nothing afterwards. The album's owner deletes any item of it;
    a contributor only those they added.

    204 whether the item existed or not (idempotent; an item not yours to delete is left
    alone).
    """
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        try:
            item, access = item_access(conn, item_id, owner.name)
        except NotFound:
            return Response(status_code=204)
    if may_delete(item, access, owner.name) and delete_item(
        runtime.engine, runtime.store, runtime.clock, item_id, owner=access.owner
    ):
        runtime.notifier.wake_local()
    return Response(status_code=204)


@router.delete(
    "/albums/{album_id}",
    status_code=204,
    response_class=Response,
    summary="Delete an album with its items",
    responses={401: _ERRORS[401], 422: _ERRORS[422]},
)
def delete_album_route(state: State, owner: Owner, album_id: AlbumId) -> Response:
    """Delete the album, every item in it and their objects; open event streams of the album
    end with `album.deleted`.

    204 whether the album existed or not (idempotent; another owner's album is left alone).
    """
    runtime = state.runtime
    deleted = delete_album(runtime.engine, runtime.store, runtime.clock, album_id, owner=owner.name)
    if deleted is not None:
        runtime.notifier.wake_local()
    return Response(status_code=204)


@router.post(
    "/items/{item_id}/resume",
    response_model=Item,
    summary="Resume a halted item",
    responses={**_ERRORS, 409: {"model": ErrorBody, "description": "The item is not halted."}},
)
def resume_item(state: State, owner: Owner, item_id: ItemId) -> dict[str, Any]:
    """Continue a halted photo or video of yours from the stage it reached (P9); 409 when not
    halted. Only the album's owner resumes (to anyone else it is 404)."""
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        item, _access = item_access(conn, item_id, owner.name)
        owned_album(conn, int(item["album_id"]), owner.name)
    resume(runtime.engine, runtime.media, item_id, clock=runtime.clock)
    return _item_of(state, item_id, owner.name)
