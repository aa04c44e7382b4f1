"""Albums and the item view: what an owner reads about a photo or video (M1-M3, P11).

An item is served with whatever roles exist now: right after intake only ``original`` (M2);
after the short lane also ``thumb``, ``medium``, ``preview`` (and ``poster`` for a video); after
the long lane ``playback`` (M3). Absent roles are simply not listed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from conveyor.clock import Clock, iso_local, iso_utc, seconds
from conveyor.db.ids import ALBUM
from conveyor.error_codes import ErrorCode
from conveyor.errors import Conflict, NotFound, RejectedInput, check_text
from conveyor.limits import ALBUM_NAME
from conveyor.media import queries

__all__ = [
    "album_items",
    "create_album",
    "find_album",
    "item_view",
    "list_albums",
    "roles_of",
    "view_of",
]


def create_album(engine: Engine, clock: Clock, *, owner: str, name: str) -> int:
    """Create the album ``name`` of ``owner``.

    Returns:
        The album's id.

    Raises:
        RejectedInput: ``no_owner`` or ``no_name``; ``invalid_request``: a name longer than
            :data:`~conveyor.limits.ALBUM_NAME` allows or with a control character.
        Conflict: the owner already has an album of that name.
    """
    owner, name = owner.strip(), name.strip()
    if not owner:
        raise RejectedInput(ErrorCode.NO_OWNER, "every album needs an owner")
    if not name:
        raise RejectedInput(ErrorCode.NO_NAME, "an album needs a name")
    check_text(ALBUM_NAME, name, "the album's name")
    try:
        with engine.begin() as conn:
            return queries.insert_album(conn, owner=owner, name=name, created_at=clock.now())
    except IntegrityError:
        raise Conflict(f"album {name!r} already exists") from None


def find_album(conn: Connection, ref: str | int, *, owner: str | None = None) -> RowMapping:
    """The album named by id or by name (of ``owner``).

    Args:
        ref: an id (int or digits) or a name; a name needs ``owner``, or must be unique.

    Raises:
        NotFound: no such album (for this owner).
    """
    text = str(ref).strip()
    # Only ids a row can have (conveyor.db.ids): a larger number is a name at most.
    album_id = ALBUM.parse(text)
    if album_id is not None:
        row = queries.album_by_id(conn, album_id, owner)
        if row is not None:
            return row
    if owner is not None:
        row = queries.album_by_name(conn, owner, text)
        if row is not None:
            return row
    else:
        named = [a for a in queries.list_albums(conn) if a["name"] == text]
        if len(named) == 1:
            return named[0]
    raise NotFound(f"album {text!r} does not exist")


def list_albums(conn: Connection, owner: str | None = None) -> list[dict[str, Any]]:
    """Albums (of ``owner``) with their item counts, oldest first."""
    return [
        {
            "id": a["id"],
            "owner": a["owner"],
            "name": a["name"],
            "items": int(a["items"]),
            "created_at": iso_utc(a["created_at"]),
        }
        for a in queries.list_albums(conn, owner)
    ]


def item_view(conn: Connection, item_id: int, *, owner: str | None = None) -> dict[str, Any]:
    """One item as served: facts, stage, halt flag and reason, and its present roles (M2).

    Returns:
        A JSON-ready dict; ``roles`` maps each present role to ``key``, ``mime_type``, ``size``
        (bytes), ``width``, ``height`` (pixels) and ``duration`` (seconds, videos). Times are
        ISO 8601 UTC.

    Raises:
        NotFound: no such item (for this owner).
    """
    item = queries.item_by_id(conn, item_id, owner)
    if item is None:
        raise NotFound(f"item {item_id} does not exist")
    return view_of(item, roles_of(conn, item_id))


def view_of(item: RowMapping, roles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The item view of :func:`item_view` from a row already read and its roles (the web's
    pages and the API serve the same fields)."""
    return {
        "id": item["id"],
        "album_id": item["album_id"],
        "owner": item["owner"],
        "kind": item["kind"],
        "original_name": item["original_name"],
        "stage": item["stage"],
        "done": item["stage"] == "done",
        "halted": item["halted_at"] is not None,
        "halt_reason": item["halt_reason"],
        "halt_error": item["halt_error"],
        "halted_at": iso_utc(item["halted_at"]),
        "attempts": item["attempts"],
        "width": item["width"],
        "height": item["height"],
        "duration": seconds(item["duration"]),
        "uploaded_at": iso_utc(item["uploaded_at"]),
        "captured_at": iso_utc(item["captured_at"]),
        "captured_offset": item["captured_offset"],
        "captured_local": iso_local(item["captured_at"], item["captured_offset"]),
        "incomplete": bool(item["incomplete"]),
        # Older code leaves it NULL: only owners added items then.
        "added_by": item["added_by"] or item["owner"],
        "roles": roles,
    }


def roles_of(conn: Connection, item_id: int) -> dict[str, dict[str, Any]]:
    """The item's objects by role: ``key``, ``mime_type``, ``size`` (bytes), ``width``,
    ``height`` (pixels), ``duration`` (seconds, videos). Absent roles are absent (M2)."""
    return {
        str(o["role"]): {
            "key": o["key"],
            "mime_type": o["mime_type"],
            "size": o["size"],
            "width": o["width"],
            "height": o["height"],
            "duration": seconds(o["duration"]),
        }
        for o in queries.objects_of(conn, item_id)
    }


def album_items(conn: Connection, album_id: int) -> list[dict[str, Any]]:
    """Every item of an album as :func:`item_view`, newest capture first (an item without a
    capture time at its upload time; id breaks ties)."""
    rows = queries.items_of_album(conn, album_id, by_capture=True)
    return [item_view(conn, int(i["id"])) for i in rows]
