"""Deleting a photo or video, or a whole album: rows, objects, and a word to the album.

Safe against a step in flight, as for recordings (:mod:`conveyor.audio.deletion`): the item's
row is locked and removed in one transaction, so a step still holding a claim on it writes
nothing afterwards (P6) — no role row, no journal row, no ``item.ready`` — and what it stored
meanwhile is removed as leftovers. Every role's object (original, thumb, medium, preview,
poster, playback) is removed after the commit, with the item's folder.

Subscribers are told: deleting an item writes an ``item.deleted`` event to the album's outbox
in the same transaction; deleting an album removes its outbox with it, and open event streams
end with an ``album.deleted`` event (:mod:`conveyor.media.broadcast`).

Idempotent: deleting what does not exist (any more) does nothing and says so.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine, RowMapping

from conveyor.clock import Clock
from conveyor.media import queries
from conveyor.media.stages import MEDIA_KEYS
from conveyor.objects import ObjectStore, delete_file_rows
from conveyor.pipeline import queries as pipeline_queries
from conveyor.pipeline.lifecycle import database_now

__all__ = ["delete_album", "delete_item"]

log = logging.getLogger("conveyor.media")


def _remove_item(conn: Connection, item: RowMapping) -> list[str]:
    item_id = int(item["id"])
    file_ids = queries.file_ids_of_item(conn, item_id)
    queries.delete_item(conn, item_id)
    keys = delete_file_rows(conn, file_ids)
    # The journal goes with the item (D14): nothing of it is left to read as another's.
    pipeline_queries.delete_events(conn, domain="media", record_id=item_id)
    return keys


def _remove_objects(store: ObjectStore, keys: list[str], item_ids: list[int]) -> None:
    for key in keys:
        store.delete(key)
    for item_id in item_ids:
        store.delete_prefix(MEDIA_KEYS.record(item_id))


def delete_item(
    engine: Engine, store: ObjectStore, clock: Clock, item_id: int, *, owner: str | None = None
) -> bool:
    """Delete the photo or video ``item_id`` (of ``owner`` when given) and its objects.

    Returns:
        True when the item existed and is gone now; False when there was none.
    """
    with engine.begin() as conn:
        item = queries.lock_item(conn, item_id, owner)
        if item is None:
            return False
        now = database_now(conn, clock)  # D17: album events carry the database's time
        keys = _remove_item(conn, item)
        payload = {"item_id": item_id, "kind": item["kind"], "stage": item["stage"]}
        queries.insert_album_event(
            conn,
            album_id=int(item["album_id"]),
            item_id=item_id,
            kind="item.deleted",
            payload=payload,
            created_at=now,
        )
    _remove_objects(store, keys, [item_id])
    log.info("item %s deleted (%d objects)", item_id, len(keys))
    return True


def delete_album(
    engine: Engine, store: ObjectStore, clock: Clock, album_id: int, *, owner: str | None = None
) -> int | None:
    """Delete the album ``album_id`` (of ``owner`` when given) with every item in it.

    Returns:
        The number of items deleted with it, or None when there was no such album.
    """
    with engine.begin() as conn:
        # Items before the album: a step's save locks its item and then the album (to write
        # an event), so taking them in the same order cannot deadlock with it.
        first = queries.lock_items_of_album(conn, album_id)
        album = queries.lock_album(conn, album_id, owner)
        if album is None:
            return None
        # Items uploaded between the two locks (an insert waits on the album lock after it).
        items = {int(i["id"]): i for i in [*first, *queries.lock_items_of_album(conn, album_id)]}
        keys: list[str] = []
        for item in items.values():
            keys += _remove_item(conn, item)
        queries.delete_album(conn, album_id)
    _remove_objects(store, keys, list(items))
    log.info("album %s deleted with %d items (%d objects)", album_id, len(items), len(keys))
    return len(items)
