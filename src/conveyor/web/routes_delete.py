"""Deleting from the pages: a recording, a photo or video, several of an album's items, an
album with everything in it.

Each delete is two steps: ``GET …/delete`` shows a page that names what goes (the recording's
name, its transcript and correction, how many bytes of files; an album's count of photos and
videos) with a button that posts the delete and a way back; the ``POST`` (session and CSRF
checked) deletes it for good, as the API's ``DELETE`` does, and goes back to the list with a
line saying what was deleted. Another owner's thing answers 404, as one that does not exist;
in a shared album a contributor deletes the photos and videos they added, and nothing else.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from conveyor.api.state import ApiState, State
from conveyor.audio import queries as audio_queries
from conveyor.audio.deletion import delete_record
from conveyor.error_codes import ErrorCode
from conveyor.errors import NotFound, RejectedInput
from conveyor.kinds import MediaKind, kind_words
from conveyor.media import queries as media_queries
from conveyor.media.deletion import delete_album, delete_item
from conveyor.media.sharing import Access, item_access, may_delete
from conveyor.sizes import human_size
from conveyor.web import queries
from conveyor.web.auth import Csrf, Viewer
from conveyor.web.ids import AlbumId, ItemId, RecordId
from conveyor.web.pages import render

__all__ = ["MAX_SELECTED", "router"]

router = APIRouter(include_in_schema=False)

MAX_SELECTED = 200
"""Items one delete of a selection may name (a grid page holds 60)."""


def _record_name(row: Any) -> str:
    return str(row["title"] or row["original_name"] or f"Recording {row['id']}")


def _item_name(row: Any) -> str:
    return str(row["original_name"] or f"Item {row['id']}")


def _confirm(
    request: Request,
    *,
    title: str,
    lines: list[str],
    action: str,
    back: str,
    fields: list[tuple[str, str]] | None = None,
    names: list[str] | None = None,
) -> Response:
    return render(
        request,
        "confirm_delete.html",
        {
            "title": title,
            "lines": lines,
            "action": action,
            "back": back,
            "fields": fields or [],
            "names": names or [],
        },
    )


@router.get("/records/{record_id}/delete")
def record_delete_page(
    request: Request, state: State, viewer: Viewer, record_id: RecordId
) -> Response:
    """What deleting the recording takes with it, and the button that does it."""
    with state.runtime.engine.connect() as conn:
        row = audio_queries.record_by_id(conn, record_id, viewer.name)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        kinds = {t["kind"] for t in audio_queries.texts_of(conn, record_id)}
        size = queries.files_size(conn, audio_queries.file_ids_of_record(conn, row))
    texts = [
        w
        for k, w in (("transcript", "its transcript"), ("proofread", "your correction"))
        if k in kinds
    ]
    lines = [
        f"The recording and its files ({human_size(size)}: the upload and the audio made from it).",
        *([f"{' and '.join(texts).capitalize()}."] if texts else []),
        "Its title, brief, topics and history.",
    ]
    return _confirm(
        request,
        title=f"Delete the recording “{_record_name(row)}”?",
        lines=lines,
        action=f"/records/{record_id}/delete",
        back=f"/records/{record_id}",
    )


def _gone(path: str, what: str) -> Response:
    return RedirectResponse(f"{path}?{urlencode({'deleted': what})}", status_code=303)


@router.post("/records/{record_id}/delete")
async def record_delete(state: State, viewer: Csrf, record_id: RecordId) -> Response:
    """Delete the recording for good, then back to the list."""
    runtime = state.runtime

    def run() -> str | None:
        with runtime.engine.connect() as conn:
            row = audio_queries.record_by_id(conn, record_id, viewer.name)
        if row is None:
            return None
        delete_record(runtime.engine, runtime.store, runtime.clock, record_id, owner=viewer.name)
        runtime.notifier.publish()
        return _record_name(row)

    name = await anyio.to_thread.run_sync(run)
    if name is None:
        raise NotFound(f"record {record_id} does not exist")
    return _gone("/records", name)


def _deletable_item(state: ApiState, item_id: int, user: str) -> tuple[Any, Access]:
    """The item when ``user`` may delete it: its album's owner, or the contributor who added
    it; to anyone else it does not exist."""
    with state.runtime.engine.connect() as conn:
        row, access = item_access(conn, item_id, user)
    if not may_delete(row, access, user):
        raise NotFound(f"item {item_id} does not exist")
    return row, access


@router.get("/items/{item_id}/delete")
def item_delete_page(request: Request, state: State, viewer: Viewer, item_id: ItemId) -> Response:
    """What deleting the photo or video takes with it, and the button that does it."""
    row, access = _deletable_item(state, item_id, viewer.name)
    with state.runtime.engine.connect() as conn:
        size = queries.items_size(conn, [item_id])
    album_name = access.album["name"]
    kind = MediaKind(row["kind"]).noun
    return _confirm(
        request,
        title=f"Delete the {kind} “{_item_name(row)}”?",
        lines=[
            f"It leaves the album “{album_name}”, with its original and the smaller versions "
            f"made from it ({human_size(size)})."
        ],
        action=f"/items/{item_id}/delete",
        back=f"/items/{item_id}",
    )


@router.post("/items/{item_id}/delete")
async def item_delete(state: State, viewer: Csrf, item_id: ItemId) -> Response:
    """Delete the photo or video for good, then back to its album."""
    runtime = state.runtime
    row, access = await anyio.to_thread.run_sync(_deletable_item, state, item_id, viewer.name)
    await anyio.to_thread.run_sync(
        lambda: delete_item(
            runtime.engine, runtime.store, runtime.clock, item_id, owner=access.owner
        )
    )
    runtime.notifier.publish()
    return _gone(f"/albums/{row['album_id']}", _item_name(row))


def _selected(state: ApiState, album_id: int, owner: str, form: Any) -> list[Any]:
    ids: list[int] = []
    for value in form.getlist("item"):
        if not isinstance(value, str) or not value.isdigit() or len(value) > 10:
            raise RejectedInput(
                ErrorCode.INVALID_REQUEST, "an item in the selection is not a number"
            )
        ids.append(int(value))
    if not ids:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, "choose at least one photo or video")
    if len(ids) > MAX_SELECTED:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, f"choose at most {MAX_SELECTED} at once")
    rows = []
    with state.runtime.engine.connect() as conn:
        for item_id in dict.fromkeys(ids):
            row = media_queries.item_by_id(conn, item_id, owner)
            if row is not None and int(row["album_id"]) == album_id:
                rows.append(row)
    if not rows:
        raise NotFound("none of the chosen items exists")
    return rows


@router.post("/albums/{album_id}/items/delete")
async def items_delete(request: Request, state: State, viewer: Csrf, album_id: AlbumId) -> Response:
    """Several items of the album chosen in the grid (form fields ``item``): without
    ``confirmed=yes`` the page naming each of them; with it, they are deleted."""
    runtime = state.runtime
    form = await request.form()
    rows = await anyio.to_thread.run_sync(_selected, state, album_id, viewer.name, form)
    if form.get("confirmed") != "yes":
        with runtime.engine.connect() as conn:
            size = queries.items_size(conn, [int(r["id"]) for r in rows])
        count = len(rows)
        return _confirm(
            request,
            title=f"Delete {kind_words(r['kind'] for r in rows)}?",
            lines=[f"With their originals and smaller versions ({human_size(size)}):"],
            names=[_item_name(r) for r in rows],
            action=f"/albums/{album_id}/items/delete",
            back=f"/albums/{album_id}",
            fields=[("confirmed", "yes"), *(("item", str(r["id"])) for r in rows)],
        )

    def run() -> None:
        for row in rows:
            delete_item(
                runtime.engine, runtime.store, runtime.clock, int(row["id"]), owner=viewer.name
            )
        runtime.notifier.publish()

    await anyio.to_thread.run_sync(run)
    count = len(rows)
    return _gone(f"/albums/{album_id}", f"{count} item{'s' if count != 1 else ''}")


@router.get("/albums/{album_id}/delete")
def album_delete_page(
    request: Request, state: State, viewer: Viewer, album_id: AlbumId
) -> Response:
    """What deleting the album takes with it, and the button that does it."""
    with state.runtime.engine.connect() as conn:
        album = media_queries.album_by_id(conn, album_id, viewer.name)
        if album is None:
            raise NotFound(f"album {album_id} does not exist")
        items = media_queries.items_of_album(conn, album_id)
        size = queries.items_size(conn, [int(i["id"]) for i in items])
    lines = [
        f"Every item in it: {kind_words(i['kind'] for i in items)}, with their originals "
        f"and smaller versions ({human_size(size)})."
        if items
        else "It is empty."
    ]
    return _confirm(
        request,
        title=f"Delete the album “{album['name']}”?",
        lines=lines,
        action=f"/albums/{album_id}/delete",
        back=f"/albums/{album_id}",
    )


@router.post("/albums/{album_id}/delete")
async def album_delete(state: State, viewer: Csrf, album_id: AlbumId) -> Response:
    """Delete the album and everything in it, then back to the albums."""
    runtime = state.runtime

    def run() -> str | None:
        with runtime.engine.connect() as conn:
            album = media_queries.album_by_id(conn, album_id, viewer.name)
        if album is None:
            return None
        delete_album(runtime.engine, runtime.store, runtime.clock, album_id, owner=viewer.name)
        runtime.notifier.publish()
        return str(album["name"])

    name = await anyio.to_thread.run_sync(run)
    if name is None:
        raise NotFound(f"album {album_id} does not exist")
    return _gone("/albums", name)
