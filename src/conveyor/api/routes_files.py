"""``/api/files/{key}``: an owner's stored objects (originals, variants, playback videos)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from conveyor.api.auth import Owner
from conveyor.api.objects import owned_file_response
from conveyor.api.schemas import ErrorBody
from conveyor.api.state import State

__all__ = ["router"]

router = APIRouter(prefix="/api/files", tags=["files"])


@router.head("/{key:path}", include_in_schema=False)
@router.get(
    "/{key:path}",
    summary="A stored object",
    response_class=Response,
    responses={
        200: {"description": "The object, with its MIME type.", "content": {"*/*": {}}},
        206: {"description": "The requested byte range (`Content-Range`)."},
        304: {"description": "Not modified (`If-None-Match` matched the ETag)."},
        401: {"model": ErrorBody, "description": "No or unknown bearer token."},
        404: {"model": ErrorBody, "description": "No such object of yours."},
        416: {"model": ErrorBody, "description": "The range starts past the end."},
    },
)
def get_file(
    request: Request,
    state: State,
    owner: Owner,
    key: Annotated[str, Path(max_length=255, description="The object's key, from a role URL.")],
) -> Response:
    """An object of one of your records or items: ETag, `If-None-Match` → 304, one byte range."""
    return owned_file_response(request, state, key, owner.name)
