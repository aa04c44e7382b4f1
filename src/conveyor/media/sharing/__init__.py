"""Shared albums: an owner shares an album with another user (``viewer``: sees it;
``contributor``: also adds to it) or by a view-only link that needs no account.

Everything here answers :class:`~conveyor.errors.NotFound` for what the asker may not reach,
exactly as for what does not exist, so a share never reveals more than it shares. A link's token
is ``secrets.token_urlsafe(32)`` (256 random bits), returned once by :func:`create_link` and
stored only as its SHA-256, like an API token; an expired or revoked link finds nothing.

Only the owner manages an album's shares and links, deletes it, or resumes its items. A
contributor's uploads are items of the owner's album (``owner`` is the album's owner, so they
count in the owner's storage and the owner may delete them) with ``added_by`` naming the
contributor, who may delete those additions (and only those) while still a contributor.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping

from conveyor.clock import Clock, iso_utc
from conveyor.error_codes import ErrorCode
from conveyor.errors import NotFound, RejectedInput
from conveyor.kinds import ShareRole
from conveyor.media import queries as media_queries
from conveyor.media.sharing import queries

__all__ = [
    "ADD",
    "CHANGE",
    "LINK",
    "LINK_PAGE",
    "OWNER",
    "Access",
    "IssuedLink",
    "album_access",
    "contributable",
    "create_link",
    "item_access",
    "link_access",
    "link_album",
    "list_links",
    "list_shares",
    "may_delete",
    "owned_album",
    "revoke_link",
    "share_album",
    "shared_with",
    "unshare_album",
]

#: The role of an album's owner in :class:`Access` (never stored: ``albums.owner`` says it).
OWNER = "owner"
#: The role of whoever holds a link.
LINK = "link"
#: What a viewer may not do to an album (:meth:`Access.refused`), and what only its owner may.
ADD = "add to it"
CHANGE = "change it"
#: Where a link's page is (``/s/<token>``), on the server's address.
LINK_PAGE = "/s/"
#: Longest expiry a link may be given: ten years, in seconds.
MAX_EXPIRY = 10 * 365 * 86_400.0


@dataclass(frozen=True)
class Access:
    """What someone may do in one album.

    Attributes:
        album: the ``albums`` row.
        role: ``owner``, ``contributor``, ``viewer`` (a share), or ``link`` (a link holder).
        link_id: the link that gave it (``link`` only).
    """

    album: RowMapping
    role: str
    link_id: int | None = None

    @property
    def album_id(self) -> int:
        """The album's id."""
        return int(self.album["id"])

    @property
    def owner(self) -> str:
        """The album owner's name: every item of the album is theirs."""
        return str(self.album["owner"])

    @property
    def is_owner(self) -> bool:
        """True for the album's owner."""
        return self.role == OWNER

    @property
    def may_add(self) -> bool:
        """True for the owner and contributors."""
        return self.role in (OWNER, ShareRole.CONTRIBUTOR)

    def refused(self, what: str) -> NotFound:
        """The refusal of ``what`` (``add to it``, ``change it``) to someone who may see the
        album but not do that: 404 ``not_found`` as to a stranger (docs/http.md), in words
        that say the album is there and what they may not do, not that it does not exist."""
        return NotFound(
            f"album {self.album_id} is shared with you as a {self.role}: you may see it, but "
            f"not {what} (only {'its owner or a contributor' if what == ADD else 'its owner'})"
        )


@dataclass(frozen=True)
class IssuedLink:
    """A link just created: ``token`` is the secret, shown once and never stored.

    ``expires_at`` is epoch seconds, or None for a link that lasts until revoked."""

    id: int
    album_id: int
    token: str
    label: str | None
    created_at: float
    expires_at: float | None

    @property
    def url(self) -> str:
        """The link's page, ``/s/<token>``, a path on the server's address."""
        return LINK_PAGE + self.token

    def shown(self) -> dict[str, Any]:
        """The link as the API answers it and ``conveyor albums link create --json`` prints
        it: ``id``, ``label``, ``created_at`` and ``expires_at`` (ISO 8601 UTC or None),
        ``expired`` (False), ``token`` and ``url``."""
        return {
            "id": self.id,
            "label": self.label,
            "created_at": iso_utc(self.created_at),
            "expires_at": iso_utc(self.expires_at),
            "expired": False,
            "token": self.token,
            "url": self.url,
        }


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _missing_album(album_id: int) -> NotFound:
    return NotFound(f"album {album_id} does not exist")


def album_access(conn: Connection, album_id: int, user: str) -> Access:
    """``user``'s access to the album (their own, or shared with them).

    Raises:
        NotFound: no such album, or not theirs nor shared with them.
    """
    role = queries.album_role(conn, album_id, user)
    album = media_queries.album_by_id(conn, album_id) if role is not None else None
    if album is None or role is None:
        raise _missing_album(album_id)
    return Access(album, role)


def owned_album(conn: Connection, album_id: int, owner: str) -> Access:
    """The album when ``owner`` owns it: the routes only an owner may use.

    Raises:
        NotFound: no such album of ``owner`` (shared with them or not).
    """
    access = album_access(conn, album_id, owner)
    if not access.is_owner:
        raise access.refused(CHANGE)
    return access


def contributable(conn: Connection, album_id: int, user: str) -> Access:
    """The album when ``user`` may add to it: their own, or shared with them as a
    contributor.

    Raises:
        NotFound: no such album, or not theirs nor shared with them, or shared with them as a
            viewer (:meth:`Access.refused`: said so, with the same 404).
    """
    access = album_access(conn, album_id, user)
    if not access.may_add:
        raise access.refused(ADD)
    return access


def item_access(conn: Connection, item_id: int, user: str) -> tuple[RowMapping, Access]:
    """The item and ``user``'s access to its album.

    Raises:
        NotFound: no such item, or its album is neither theirs nor shared with them.
    """
    item = media_queries.item_by_id(conn, item_id)
    if item is not None:
        role = queries.album_role(conn, int(item["album_id"]), user)
        album = media_queries.album_by_id(conn, int(item["album_id"]))
        if role is not None and album is not None:
            return item, Access(album, role)
    raise NotFound(f"item {item_id} does not exist")


def link_access(conn: Connection, token: str, now: float) -> Access:
    """The album a link's holder sees (role ``link``).

    Raises:
        NotFound: no such link, or revoked, or expired (``expires_at`` <= ``now``).
    """
    link = queries.link_by_hash(conn, _hash(token)) if 0 < len(token) <= 200 else None
    if link is not None and (link["expires_at"] is None or link["expires_at"] > now):
        album = media_queries.album_by_id(conn, int(link["album_id"]))
        if album is not None:
            return Access(album, LINK, link_id=int(link["id"]))
    raise NotFound("this link does not exist, or it was revoked or has expired")


def may_delete(item: RowMapping, access: Access, user: str) -> bool:
    """Whether ``user`` may delete the item: its album's owner, or the contributor who added
    it (while a contributor)."""
    if access.is_owner:
        return True
    return access.role == ShareRole.CONTRIBUTOR and item["added_by"] == user


def share_album(
    engine: Engine, clock: Clock, album_id: int, *, owner: str, user: str, role: ShareRole
) -> dict[str, Any]:
    """Share ``owner``'s album with ``user`` as ``role`` (``viewer`` or ``contributor``); a
    second share with the same user changes the role.

    Returns:
        The share: ``user``, ``role``, ``created_at`` (ISO 8601 UTC).

    Raises:
        NotFound: no such album of ``owner``, or no user ``user``.
        RejectedInput: ``share_with_owner`` (the owner has it already).
    """
    user = user.strip()
    with engine.begin() as conn:
        owned_album(conn, album_id, owner)
        # Before the user look-up: the shell's owner (`me`) need not be a user with a row.
        if user == owner:
            raise RejectedInput(
                ErrorCode.SHARE_WITH_OWNER, "an album is its owner's already: share it with others"
            )
        user_id = queries.user_id_by_name(conn, user)
        if user_id is None:
            raise NotFound(f"user {user!r} does not exist")
        queries.put_share(
            conn, album_id=album_id, user_id=user_id, role=role.value, now=clock.now()
        )
        share = next(s for s in queries.shares_of(conn, album_id) if s["user"] == user)
    return _share(share)


def _share(row: RowMapping) -> dict[str, Any]:
    return {"user": row["user"], "role": row["role"], "created_at": iso_utc(row["created_at"])}


def unshare_album(engine: Engine, album_id: int, *, owner: str, user: str) -> bool:
    """Stop sharing ``owner``'s album with ``user``: from now on it answers 404 to them, and
    their open event streams (API and pages) end within seconds.

    Returns:
        False when it was not shared with them.

    Raises:
        NotFound: no such album of ``owner``.
    """
    with engine.begin() as conn:
        owned_album(conn, album_id, owner)
        user_id = queries.user_id_by_name(conn, user.strip())
        return user_id is not None and queries.delete_share(conn, album_id, user_id)


def list_shares(conn: Connection, album_id: int, *, owner: str) -> list[dict[str, Any]]:
    """The users ``owner``'s album is shared with: ``user``, ``role``, ``created_at``.

    Raises:
        NotFound: no such album of ``owner``.
    """
    owned_album(conn, album_id, owner)
    return [_share(s) for s in queries.shares_of(conn, album_id)]


def shared_with(conn: Connection, user: str) -> list[dict[str, Any]]:
    """The albums others share with ``user``, oldest share first: ``id``, ``owner``, ``name``,
    ``items`` (count), ``role``, ``created_at`` and ``shared_at`` (ISO 8601 UTC)."""
    return [
        {
            "id": a["id"],
            "owner": a["owner"],
            "name": a["name"],
            "items": int(a["items"]),
            "role": a["role"],
            "created_at": iso_utc(a["created_at"]),
            "shared_at": iso_utc(a["shared_at"]),
        }
        for a in queries.shared_with(conn, user)
    ]


def create_link(
    engine: Engine,
    clock: Clock,
    album_id: int,
    *,
    owner: str,
    expires_in: float | None = None,
    label: str | None = None,
) -> IssuedLink:
    """A new view-only link to ``owner``'s album; only its token's hash is stored.

    Args:
        expires_in: seconds from now until it stops working (None: until revoked).
        label: a note for the owner (who it was given to).

    Raises:
        NotFound: no such album of ``owner``.
        RejectedInput: ``bad_expiry`` (not positive, or over ten years).
    """
    if expires_in is not None and not 0 < expires_in <= MAX_EXPIRY:
        raise RejectedInput(
            ErrorCode.BAD_EXPIRY, "a link expires between a second and ten years from now"
        )
    token = secrets.token_urlsafe(32)
    now = clock.now()
    expires_at = None if expires_in is None else now + expires_in
    label = (label or "").strip() or None
    with engine.begin() as conn:
        owned_album(conn, album_id, owner)
        link_id = queries.insert_link(
            conn,
            album_id=album_id,
            token_hash=_hash(token),
            label=label,
            now=now,
            expires_at=expires_at,
        )
    return IssuedLink(link_id, album_id, token, label, now, expires_at)


def list_links(conn: Connection, album_id: int, *, owner: str, now: float) -> list[dict[str, Any]]:
    """``owner``'s links to the album: ``id``, ``label``, ``created_at``, ``expires_at`` (ISO
    8601 UTC or None) and ``expired``; never a token.

    Raises:
        NotFound: no such album of ``owner``.
    """
    owned_album(conn, album_id, owner)
    return [
        {
            "id": link["id"],
            "label": link["label"],
            "created_at": iso_utc(link["created_at"]),
            "expires_at": iso_utc(link["expires_at"]),
            "expired": link["expires_at"] is not None and link["expires_at"] <= now,
        }
        for link in queries.links_of(conn, album_id)
    ]


def link_album(conn: Connection, link_id: int, *, owner: str) -> int:
    """The album of ``owner`` that the link shows.

    Raises:
        NotFound: no such link to an album of ``owner``.
    """
    album_id = queries.link_album(conn, link_id) if 1 <= link_id < 2**63 else None
    if album_id is None or queries.album_role(conn, album_id, owner) != OWNER:
        raise NotFound(f"link {link_id} does not exist")
    return album_id


def revoke_link(engine: Engine, album_id: int, link_id: int, *, owner: str) -> bool:
    """Revoke a link of ``owner``'s album: it answers 404 from now on.

    Returns:
        False when the album has no such link.

    Raises:
        NotFound: no such album of ``owner``.
    """
    with engine.begin() as conn:
        owned_album(conn, album_id, owner)
        return queries.delete_link(conn, album_id, link_id)
