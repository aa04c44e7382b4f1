"""Statements of the HTTP layer that span both domains: file ownership, the health ping."""

from __future__ import annotations

from sqlalchemy import Connection, RowMapping, exists, or_, select, text

from conveyor.db.tables import audio_records, files, media_items, media_objects

__all__ = ["owned_file", "ping"]


def owned_file(conn: Connection, key: str, owner: str) -> RowMapping | None:
    """The journal row of ``key`` when it is an object of one of ``owner``'s records or items.

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
        media_items.c.owner == owner,
    )
    if "\x00" in key:  # no key holds one, and PostgreSQL refuses it in a text comparison
        return None
    query = select(files).where(files.c.key == key, or_(of_record, of_item))
    return conn.execute(query).mappings().first()


def ping(conn: Connection) -> None:
    """One round trip to the database."""
    conn.execute(text("SELECT 1"))
