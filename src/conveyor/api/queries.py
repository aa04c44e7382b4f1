"""Statements of the HTTP layer that span both domains: file ownership, the health ping."""

from __future__ import annotations

from sqlalchemy import Connection, RowMapping, exists, insert, or_, select, text

from conveyor.db.tables import audio_records, files, idempotency_keys, media_items, media_objects
from conveyor.media.sharing.queries import shared_album_ids

__all__ = ["album_file", "idempotent_target", "insert_idempotency_key", "owned_file", "ping"]


def owned_file(conn: Connection, key: str, owner: str) -> RowMapping | None:
    """The journal row of ``key`` when it is an object of one of ``owner``'s records or items,
    or of an item in an album shared with ``owner``.

    An audio record owns its original and normalized files; a media item owns its objects by
    role. Raw provider responses and scratch files belong to nobody here.
    """
    of_record = exists().where(
        audio_records.c.owner == owner,
        or_(
            audio_records.c.original_file_id == files.c.id,
            audio_records.c.normalized_file_id == files.c.id,
        ),
    )
    of_item = exists().where(
        media_objects.c.file_id == files.c.id,
        media_items.c.id == media_objects.c.item_id,
        or_(media_items.c.owner == owner, media_items.c.album_id.in_(shared_album_ids(owner))),
    )
    if "\x00" in key:  # no key holds one, and PostgreSQL refuses it in a text comparison
        return None
    query = select(files).where(files.c.key == key, or_(of_record, of_item))
    return conn.execute(query).mappings().first()


def album_file(conn: Connection, key: str, album_id: int) -> RowMapping | None:
    """The journal row of ``key`` when it is an object of an item of the album (what a link's
    holder may fetch)."""
    of_item = exists().where(
        media_objects.c.file_id == files.c.id,
        media_items.c.id == media_objects.c.item_id,
        media_items.c.album_id == album_id,
    )
    if "\x00" in key:
        return None
    return conn.execute(select(files).where(files.c.key == key, of_item)).mappings().first()


def ping(conn: Connection) -> None:
    """One round trip to the database."""
    conn.execute(text("SELECT 1"))


def insert_idempotency_key(
    conn: Connection,
    *,
    owner: str,
    scope: str,
    key: str,
    now: float,
    record_id: int | None = None,
    item_id: int | None = None,
) -> None:
    """Remember that ``owner``'s ``key`` in ``scope`` created this record or item.

    Raises:
        sqlalchemy.exc.IntegrityError: the key is taken (a concurrent retry won).
    """
    conn.execute(
        insert(idempotency_keys).values(
            owner=owner, scope=scope, key=key, record_id=record_id, item_id=item_id, created_at=now
        )
    )


def idempotent_target(conn: Connection, *, owner: str, scope: str, key: str) -> int | None:
    """The record or item id an earlier request with this key created, if it still exists."""
    row = conn.execute(
        select(idempotency_keys.c.record_id, idempotency_keys.c.item_id).where(
            idempotency_keys.c.owner == owner,
            idempotency_keys.c.scope == scope,
            idempotency_keys.c.key == key,
        )
    ).first()
    if row is None:
        return None
    return int(row[0] if row[0] is not None else row[1])
