"""The media domain's statements: albums, items, objects by role, the album outbox (Core)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    Insert,
    Integer,
    RowMapping,
    String,
    column,
    delete,
    exists,
    func,
    insert,
    literal,
    select,
    update,
    values,
)

from conveyor.db.album_signals import ALBUM_CHANNEL, notify_album
from conveyor.db.tables import album_events, albums, files, media_items, media_objects
from conveyor.objects.queries import journal_values, put_file_rows

__all__ = [
    "AlbumEvent",
    "add_new_objects",
    "add_objects",
    "album_by_id",
    "album_by_name",
    "events_after",
    "insert_album",
    "insert_album_event",
    "insert_item",
    "item_by_id",
    "item_with_content",
    "items_of_album",
    "latest_event_id",
    "list_albums",
    "live_partner",
    "move_object",
    "objects_of",
    "put_object",
]


def insert_album(conn: Connection, *, owner: str, name: str, created_at: float) -> int:
    """Insert an ``albums`` row; returns its id."""
    result = conn.execute(insert(albums).values(owner=owner, name=name, created_at=created_at))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def album_by_id(conn: Connection, album_id: int, owner: str | None = None) -> RowMapping | None:
    """One album (of ``owner`` when given)."""
    query = select(albums).where(albums.c.id == album_id)
    if owner is not None:
        query = query.where(albums.c.owner == owner)
    return conn.execute(query).mappings().first()


def album_by_name(conn: Connection, owner: str, name: str) -> RowMapping | None:
    """The album ``name`` of ``owner``."""
    query = select(albums).where(albums.c.owner == owner, albums.c.name == name)
    return conn.execute(query).mappings().first()


def list_albums(conn: Connection, owner: str | None = None) -> Sequence[RowMapping]:
    """Albums with their item count, oldest first."""
    count = (
        select(func.count())
        .select_from(media_items)
        .where(media_items.c.album_id == albums.c.id)
        .scalar_subquery()
    )
    query = select(albums, count.label("items")).order_by(albums.c.id)
    if owner is not None:
        query = query.where(albums.c.owner == owner)
    return conn.execute(query).mappings().all()


def insert_item(conn: Connection, **values: Any) -> int:
    """Insert a ``media_items`` row; returns its id."""
    result = conn.execute(insert(media_items).values(**values))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def item_by_id(conn: Connection, item_id: int, owner: str | None = None) -> RowMapping | None:
    """One media item (of ``owner`` when given)."""
    query = select(media_items).where(media_items.c.id == item_id)
    if owner is not None:
        query = query.where(media_items.c.owner == owner)
    return conn.execute(query).mappings().first()


TAKEN_AT = func.coalesce(media_items.c.captured_at, media_items.c.uploaded_at)
"""An item's place in its album (epoch seconds): when it was taken, or when it was uploaded
where no capture time is known (yet). Albums are shown newest first by it, id breaking ties:
the API, the CLI and the web grid alike."""


def items_of_album(
    conn: Connection, album_id: int, *, by_capture: bool = False
) -> Sequence[RowMapping]:
    """The items of an album, newest upload first (id breaks ties); ``by_capture``: newest
    capture first (:data:`TAKEN_AT`)."""
    newest = TAKEN_AT if by_capture else media_items.c.uploaded_at
    query = (
        select(media_items)
        .where(media_items.c.album_id == album_id)
        .order_by(newest.desc(), media_items.c.id.desc())
    )
    return conn.execute(query).mappings().all()


def put_object(conn: Connection, item_id: int, role: str, file_id: int) -> None:
    """Point the item's ``role`` at ``file_id``, replacing an earlier row (one per role, M1)."""
    conn.execute(
        delete(media_objects).where(
            media_objects.c.item_id == item_id, media_objects.c.role == role
        )
    )
    conn.execute(insert(media_objects).values(item_id=item_id, role=role, file_id=file_id))


def live_partner(conn: Connection, album_id: int, content_id: str, kind: str) -> RowMapping | None:
    """The oldest item of ``kind`` in the album with this Live Photo ``content_id`` that has no
    movie paired yet (no ``motion_original`` role), or None."""
    paired = exists().where(
        media_objects.c.item_id == media_items.c.id, media_objects.c.role == "motion_original"
    )
    query = (
        select(media_items)
        .where(
            media_items.c.album_id == album_id,
            media_items.c.content_id == content_id,
            media_items.c.kind == kind,
            ~paired,
        )
        .order_by(media_items.c.id)
        .limit(1)
    )
    return conn.execute(query).mappings().first()


def move_object(conn: Connection, item_id: int, role: str, to_item: int, to_role: str) -> bool:
    """Hand the object of ``item_id``'s ``role`` to ``to_item`` as ``to_role`` (its one journal
    row kept, M1); False when there is no such role row."""
    moved = conn.execute(
        update(media_objects)
        .where(media_objects.c.item_id == item_id, media_objects.c.role == role)
        .values(item_id=to_item, role=to_role)
    ).rowcount
    return bool(moved)


def add_objects(conn: Connection, item_id: int, roles: Mapping[str, int]) -> None:
    """Point the item's new ``roles`` (none of which it has yet) at their journal rows, in one
    statement."""
    if roles:
        rows = [{"item_id": item_id, "role": r, "file_id": f} for r, f in roles.items()]
        conn.execute(insert(media_objects).values(rows))


@dataclass(frozen=True)
class AlbumEvent:
    """One event for an album's outbox (M5): what :func:`insert_album_event` appends."""

    album_id: int
    item_id: int
    kind: str
    payload: dict[str, Any]
    created_at: float


def add_new_objects(
    conn: Connection,
    item_id: int,
    objects: Sequence[Mapping[str, Any]],
    roles: Mapping[str, str],
    now: float,
    *,
    event: AlbumEvent | None = None,
) -> None:
    """Journal new objects and point the item's new ``roles`` (role → key, none of which it has
    yet) at them, and append ``event`` to its album's outbox: on PostgreSQL ONE statement (the
    journal rows and the role rows inserted in a ``WITH`` before the event's insert), on SQLite
    one each.

    Args:
        objects: the journal rows of the new objects, as :func:`put_file_rows` takes them.
        roles: every new role and the key of the object it names (several roles may name one).

    Raises:
        LookupError: ``event``'s album does not exist.
    """
    if conn.dialect.name != "postgresql":
        ids = put_file_rows(conn, objects, now)
        by_key = {str(o["key"]): i for o, i in zip(objects, ids, strict=True)}
        add_objects(conn, item_id, {role: by_key[key] for role, key in roles.items()})
        if event is not None:
            _one_event(conn, _event_insert(conn, event), event)
        return
    if not objects:
        if event is not None:
            _one_event(conn, _event_insert(conn, event), event)
        return
    journaled = (
        insert(files)
        .values(journal_values(objects, now))
        .returning(files.c.id, files.c.key)
        .cte("journaled")
    )
    named = values(column("role", String), column("key", String), name="named").data(
        sorted(roles.items())
    )
    pointed = insert(media_objects).from_select(
        ["item_id", "role", "file_id"],
        select(literal(item_id, Integer), named.c.role, journaled.c.id).join(
            named, named.c.key == journaled.c.key
        ),
    )
    if event is None:
        conn.execute(pointed)
        return
    # A data-modifying WITH runs whether or not the statement reads it (PostgreSQL).
    _one_event(conn, _event_insert(conn, event).add_cte(pointed.cte("pointed")), event)


def objects_of(conn: Connection, item_id: int) -> Sequence[RowMapping]:
    """The item's objects: role plus the journal row's key, MIME type, size, dims, state."""
    query = (
        select(
            media_objects.c.role,
            files.c.id.label("file_id"),
            files.c.key,
            files.c.mime_type,
            files.c.size,
            files.c.width,
            files.c.height,
            files.c.duration,
            files.c.state,
        )
        .join(files, files.c.id == media_objects.c.file_id)
        .where(media_objects.c.item_id == item_id)
        .order_by(media_objects.c.role)
    )
    return conn.execute(query).mappings().all()


def insert_album_event(
    conn: Connection,
    *,
    album_id: int,
    item_id: int,
    kind: str,
    payload: dict[str, Any],
    created_at: float,
) -> int:
    """Append one event to the album's outbox (M5), in one statement; returns its id.

    The album row is locked first (the insert's ``SELECT … FOR UPDATE``), so writers of one
    album take ids in commit order: a reader that has seen id N never later finds a smaller id
    committed (PostgreSQL hands out sequence values before commit; SQLite serialises writers
    anyway and drops the lock clause). On PostgreSQL the same statement notifies the album's
    listeners (delivered on commit to every process that listens).

    Raises:
        LookupError: there is no album ``album_id``.
    """
    event = AlbumEvent(album_id, item_id, kind, payload, created_at)
    return _one_event(conn, _event_insert(conn, event), event)


def _event_insert(conn: Connection, event: AlbumEvent) -> Insert:
    source = (
        select(
            albums.c.id,
            literal(event.item_id, Integer),
            literal(event.kind, String),
            literal(event.payload, album_events.c.payload.type),
            literal(event.created_at, album_events.c.created_at.type),
        )
        .where(albums.c.id == event.album_id)
        .with_for_update()
    )
    statement = insert(album_events).from_select(
        ["album_id", "item_id", "kind", "payload", "created_at"], source
    )
    if conn.dialect.name == "postgresql":
        # The notification in the same round trip: a worker far from the database pays each.
        return statement.returning(
            album_events.c.id, func.pg_notify(ALBUM_CHANNEL, str(event.album_id))
        )
    return statement.returning(album_events.c.id)


def _one_event(conn: Connection, statement: Insert, event: AlbumEvent) -> int:
    row = conn.execute(statement).first()
    if row is None:
        raise LookupError(f"album {event.album_id} does not exist")
    return int(row[0])


def events_after(
    conn: Connection, album_id: int, last_id: int, limit: int = 100
) -> Sequence[RowMapping]:
    """The album's outbox events with id above ``last_id``, oldest first."""
    query = (
        select(album_events)
        .where(album_events.c.album_id == album_id, album_events.c.id > last_id)
        .order_by(album_events.c.id)
        .limit(limit)
    )
    return conn.execute(query).mappings().all()


def latest_event_id(conn: Connection, album_id: int) -> int:
    """The newest event id of the album's outbox, 0 when it has none."""
    query = select(func.max(album_events.c.id)).where(album_events.c.album_id == album_id)
    return int(conn.execute(query).scalar() or 0)


def lock_item(conn: Connection, item_id: int, owner: str | None = None) -> RowMapping | None:
    """Read one item and lock its row until the transaction ends (a deletion's first step)."""
    query = select(media_items).where(media_items.c.id == item_id).with_for_update()
    if owner is not None:
        query = query.where(media_items.c.owner == owner)
    return conn.execute(query).mappings().first()


def lock_album(conn: Connection, album_id: int, owner: str | None = None) -> RowMapping | None:
    """Read one album and lock its row until the transaction ends (event writers lock it too)."""
    query = select(albums).where(albums.c.id == album_id).with_for_update()
    if owner is not None:
        query = query.where(albums.c.owner == owner)
    return conn.execute(query).mappings().first()


def lock_items_of_album(conn: Connection, album_id: int) -> Sequence[RowMapping]:
    """The album's items, each row locked until the transaction ends."""
    query = (
        select(media_items)
        .where(media_items.c.album_id == album_id)
        .order_by(media_items.c.id)
        .with_for_update()
    )
    return conn.execute(query).mappings().all()


def file_ids_of_item(conn: Connection, item_id: int) -> set[int]:
    """Every journal row an item points at, by any role."""
    query = select(media_objects.c.file_id).where(media_objects.c.item_id == item_id)
    return {int(i) for i in conn.execute(query).scalars()}


def delete_item(conn: Connection, item_id: int) -> None:
    """Remove an item row; its role rows and idempotency keys go with it."""
    conn.execute(delete(media_items).where(media_items.c.id == item_id))


def delete_album(conn: Connection, album_id: int) -> None:
    """Remove an album row; its items (and their roles) and its event outbox go with it."""
    conn.execute(delete(albums).where(albums.c.id == album_id))
    notify_album(conn, album_id)  # open streams learn the album is gone


def item_with_content(
    conn: Connection, owner: str, sha256: str, *, album_id: int | None = None
) -> int | None:
    """The id of ``owner``'s oldest item (in any album, or in ``album_id``) whose original has
    these bytes (its SHA-256, hex), or None: how intake keeps each file once per owner."""
    query = (
        select(media_items.c.id)
        .join(media_objects, media_objects.c.item_id == media_items.c.id)
        .join(files, files.c.id == media_objects.c.file_id)
        .where(
            media_items.c.owner == owner,
            media_objects.c.role == "original",
            files.c.sha256 == sha256,
        )
        .order_by(media_items.c.id)
        .limit(1)
    )
    if album_id is not None:
        query = query.where(media_items.c.album_id == album_id)
    row = conn.execute(query).first()
    return None if row is None else int(row[0])
