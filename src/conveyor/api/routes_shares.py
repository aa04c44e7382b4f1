"""Shared albums over HTTP: the owner's shares and view-only links, and the albums others share
with you.

Only an album's owner reads or changes its shares and links; to anyone else (a viewer, a
contributor, a stranger) these routes answer 404, as for an album that does not exist.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from conveyor.api.auth import Owner
from conveyor.api.ids import AlbumId, LinkId
from conveyor.api.schemas import (
    ErrorBody,
    IssuedLink,
    Link,
    LinkCreate,
    Share,
    ShareCreate,
    SharedAlbum,
)
from conveyor.api.state import State
from conveyor.errors import NotFound
from conveyor.kinds import ShareRole
from conveyor.limits import USER_NAME
from conveyor.media import sharing

__all__ = ["LINK_PAGE", "router"]

router = APIRouter(prefix="/api", tags=["sharing"])

#: The web page a link opens (``/s/<token>``), for whoever holds it.
LINK_PAGE = sharing.LINK_PAGE

UserName = Annotated[
    str,
    Path(max_length=USER_NAME.longest, pattern=USER_NAME.pattern, description="The user's name."),
]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No or unknown bearer token."},
    404: {"model": ErrorBody, "description": "No such album of yours (or no such user)."},
    422: {"model": ErrorBody, "description": "Invalid fields."},
}


@router.get(
    "/shared-albums",
    response_model=list[SharedAlbum],
    summary="Albums shared with you",
    responses={401: _ERRORS[401]},
)
def shared_albums(state: State, owner: Owner) -> list[dict[str, Any]]:
    """The albums other users share with you, oldest share first, with your role in each."""
    with state.runtime.engine.connect() as conn:
        albums = sharing.shared_with(conn, owner.name)
    return [
        {
            "id": a["id"],
            "owner": a["owner"],
            "name": a["name"],
            "item_count": a["items"],
            "created_at": a["created_at"],
            "role": a["role"],
            "shared_at": a["shared_at"],
            "links": {
                "self": f"/api/albums/{a['id']}",
                "items": f"/api/albums/{a['id']}/items",
                "events": f"/api/albums/{a['id']}/events",
            },
        }
        for a in albums
    ]


@router.get(
    "/albums/{album_id}/shares",
    response_model=list[Share],
    summary="Who an album of yours is shared with",
    responses=_ERRORS,
)
def list_shares(state: State, owner: Owner, album_id: AlbumId) -> list[dict[str, Any]]:
    """The users the album is shared with and their roles, by name."""
    with state.runtime.engine.connect() as conn:
        return sharing.list_shares(conn, album_id, owner=owner.name)


@router.post(
    "/albums/{album_id}/shares",
    response_model=Share,
    summary="Share an album with a user",
    responses={
        **_ERRORS,
        413: {"model": ErrorBody, "description": "A body over 1 MiB."},
        422: {
            "model": ErrorBody,
            "description": "Invalid fields, or the user is the album's owner (`share_with_owner`).",
        },
    },
)
def share(state: State, owner: Owner, album_id: AlbumId, body: ShareCreate) -> dict[str, Any]:
    """Share the album with `user` as `viewer` or `contributor`; sharing again with the same
    user changes the role. From then on the album, its items, their files and its live events
    answer them as they answer you (a contributor may also upload)."""
    runtime = state.runtime
    return sharing.share_album(
        runtime.engine,
        runtime.clock,
        album_id,
        owner=owner.name,
        user=body.user,
        role=ShareRole(body.role),
    )


@router.delete(
    "/albums/{album_id}/shares/{user:path}",
    status_code=204,
    response_class=Response,
    summary="Stop sharing an album with a user",
    responses={401: _ERRORS[401], 422: _ERRORS[422]},
)
def unshare(state: State, owner: Owner, album_id: AlbumId, user: UserName) -> Response:
    """From now on the album answers the user 404; what a contributor added stays in it.

    204 whether it was shared with them or not (idempotent; an album not yours is left alone).
    """
    with contextlib.suppress(NotFound):
        sharing.unshare_album(state.runtime.engine, album_id, owner=owner.name, user=user)
    return Response(status_code=204)


@router.get(
    "/albums/{album_id}/links",
    response_model=list[Link],
    summary="The view-only links to an album of yours",
    responses=_ERRORS,
)
def list_links(state: State, owner: Owner, album_id: AlbumId) -> list[dict[str, Any]]:
    """Every link not revoked, expired ones included (`expired: true`); never a token."""
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        return sharing.list_links(conn, album_id, owner=owner.name, now=runtime.clock.now())


@router.post(
    "/albums/{album_id}/links",
    status_code=201,
    response_model=IssuedLink,
    summary="Create a view-only link to an album",
    responses={**_ERRORS, 413: {"model": ErrorBody, "description": "A body over 1 MiB."}},
)
def create_link(
    response: Response, state: State, owner: Owner, album_id: AlbumId, body: LinkCreate
) -> dict[str, Any]:
    """A link whoever holds it opens without an account (`url`): the album's grid, its photos
    and videos and their live updates, nothing else, until it expires or is revoked. Its
    `token` is shown this once; only its SHA-256 is kept."""
    runtime = state.runtime
    issued = sharing.create_link(
        runtime.engine,
        runtime.clock,
        album_id,
        owner=owner.name,
        expires_in=body.expires_in,
        label=body.label,
    )
    response.headers["Location"] = f"/api/albums/{album_id}/links"
    return issued.shown()


@router.delete(
    "/albums/{album_id}/links/{link_id}",
    status_code=204,
    response_class=Response,
    summary="Revoke a link",
    responses={401: _ERRORS[401], 422: _ERRORS[422]},
)
def revoke_link(state: State, owner: Owner, album_id: AlbumId, link_id: LinkId) -> Response:
    """The link answers 404 from now on, and its open live streams end.

    204 whether the link existed or not (idempotent; an album not yours is left alone).
    """
    with contextlib.suppress(NotFound):
        sharing.revoke_link(state.runtime.engine, album_id, link_id, owner=owner.name)
    return Response(status_code=204)
