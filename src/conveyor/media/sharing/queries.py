"""Album sharing's statements: shares with users, view-only links, what a user may reach (Core)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, RowMapping, Select, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from conveyor.db.tables import album_links, album_shares, albums, media_items, users

__all__ = [
    "album_role",
    "delete_link",
    "delete_share",
    "insert_link",
    "link_album",
    "link_by_hash",
    "links_of",
    "put_share",
    "shared_album_ids",
    "shared_with",
    "shares_of",
    "user_id_by_name",
]


def user_id_by_name(conn: Connection, name: str) -> int | None:
    """The id of the user called ``name``."""
    found = conn.execute(select(users.c.id).where(users.c.name == name)).scalar()
    return None if found is None else int(found)


def shared_album_ids(user: str) -> Select[tuple[int]]:
    """The ids of the albums shared with ``user`` (a subquery)."""
    return (
        select(album_shares.c.album_id)
        .join(users, users.c.id == album_shares.c.user_id)
        .where(users.c.name == user)
    )


def album_role(conn: Connection, album_id: int, user: str) -> str | None:
    """``user``'s role in the album: ``owner``, ``viewer``, ``contributor``, or None."""
    row = conn.execute(select(albums.c.owner).where(albums.c.id == album_id)).first()
    if row is None:
        return None
    if row[0] == user:
        return "owner"
    role = conn.execute(
        select(album_shares.c.role)
        .join(users, users.c.id == album_shares.c.user_id)
        .where(album_shares.c.album_id == album_id, users.c.name == user)
    ).scalar()
    return None if role is None else str(role)


def put_share(conn: Connection, *, album_id: int, user_id: int, role: str, now: float) -> None:
    """Share the album with the user in ``role``, or change the role of an existing share
    (its ``created_at`` kept)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(album_shares).values(
        album_id=album_id, user_id=user_id, role=role, created_at=now
    )
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["album_id", "user_id"], set_={"role": statement.excluded.role}
        )
    )


def delete_share(conn: Connection, album_id: int, user_id: int) -> bool:
    """Stop sharing the album with the user; False when it was not shared with them."""
    result = conn.execute(
        delete(album_shares).where(
            album_shares.c.album_id == album_id, album_shares.c.user_id == user_id
        )
    )
    return result.rowcount > 0


def shares_of(conn: Connection, album_id: int) -> Sequence[RowMapping]:
    """The album's shares: ``user``, ``role``, ``created_at``, by user name."""
    return (
        conn.execute(
            select(users.c.name.label("user"), album_shares.c.role, album_shares.c.created_at)
            .join(users, users.c.id == album_shares.c.user_id)
            .where(album_shares.c.album_id == album_id)
            .order_by(users.c.name)
        )
        .mappings()
        .all()
    )


def shared_with(conn: Connection, user: str) -> Sequence[RowMapping]:
    """The albums shared with ``user``, oldest share first: the album's columns, ``role``,
    ``shared_at`` and ``items`` (its item count)."""
    count = (
        select(func.count())
        .select_from(media_items)
        .where(media_items.c.album_id == albums.c.id)
        .scalar_subquery()
    )
    query = (
        select(
            albums,
            album_shares.c.role,
            album_shares.c.created_at.label("shared_at"),
            count.label("items"),
        )
        .join(album_shares, album_shares.c.album_id == albums.c.id)
        .join(users, users.c.id == album_shares.c.user_id)
        .where(users.c.name == user)
        .order_by(album_shares.c.created_at, albums.c.id)
    )
    return conn.execute(query).mappings().all()


def insert_link(
    conn: Connection,
    *,
    album_id: int,
    token_hash: str,
    label: str | None,
    now: float,
    expires_at: float | None,
) -> int:
    """Insert an ``album_links`` row; returns its id."""
    result = conn.execute(
        insert(album_links).values(
            album_id=album_id,
            token_hash=token_hash,
            label=label,
            created_at=now,
            expires_at=expires_at,
        )
    )
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def link_by_hash(conn: Connection, token_hash: str) -> RowMapping | None:
    """The link whose token has this SHA-256 (expired or not)."""
    query = select(album_links).where(album_links.c.token_hash == token_hash)
    return conn.execute(query).mappings().first()


def link_album(conn: Connection, link_id: int) -> int | None:
    """The id of the album the link shows, or None when there is no such link."""
    found = conn.execute(select(album_links.c.album_id).where(album_links.c.id == link_id))
    album_id = found.scalar()
    return None if album_id is None else int(album_id)


def links_of(conn: Connection, album_id: int) -> Sequence[RowMapping]:
    """The album's links, oldest first (never a token: only its hash is stored)."""
    query = (
        select(
            album_links.c.id,
            album_links.c.label,
            album_links.c.created_at,
            album_links.c.expires_at,
        )
        .where(album_links.c.album_id == album_id)
        .order_by(album_links.c.id)
    )
    return conn.execute(query).mappings().all()


def delete_link(conn: Connection, album_id: int, link_id: int) -> bool:
    """Revoke a link of the album; False when it has no such link."""
    result = conn.execute(
        delete(album_links).where(album_links.c.album_id == album_id, album_links.c.id == link_id)
    )
    return result.rowcount > 0
