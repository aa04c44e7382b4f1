"""Your standing vocabulary hints: names and terms for every recording of yours."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from conveyor.api.auth import Owner
from conveyor.api.schemas import ErrorBody, Vocabulary
from conveyor.api.state import State
from conveyor.audio.vocabulary import owner_vocabulary, set_owner_vocabulary

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["records"])

_UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No or unknown bearer token."},
}


@router.get(
    "/vocabulary",
    response_model=Vocabulary,
    summary="Your vocabulary hints",
    responses=_UNAUTHORIZED,
)
def get_vocabulary(state: State, owner: Owner) -> dict[str, Any]:
    """The names and terms given to the recognizer with every recording of yours (`null`: none).

    A recording's own `hints` are added after them; a term in both is given once."""
    with state.runtime.engine.connect() as conn:
        return {"hints": owner_vocabulary(conn, owner.name)}


@router.put(
    "/vocabulary",
    response_model=Vocabulary,
    summary="Set your vocabulary hints",
    responses={
        **_UNAUTHORIZED,
        400: {"model": ErrorBody, "description": "Body is not JSON."},
        422: {"model": ErrorBody, "description": "Too long, or control characters."},
    },
)
def put_vocabulary(state: State, owner: Owner, body: Vocabulary) -> dict[str, Any]:
    """Replace your vocabulary (at most 1,000 characters; whitespace is collapsed); `null` or
    an empty text removes it. It applies to every recording not yet sent to the recognizer."""
    runtime = state.runtime
    return {"hints": set_owner_vocabulary(runtime.engine, runtime.clock, owner.name, body.hints)}


@router.delete(
    "/vocabulary",
    status_code=204,
    response_class=Response,
    summary="Remove your vocabulary hints",
    responses=_UNAUTHORIZED,
)
def delete_vocabulary(state: State, owner: Owner) -> Response:
    """204 whether or not there was one (idempotent, like every deletion)."""
    runtime = state.runtime
    set_owner_vocabulary(runtime.engine, runtime.clock, owner.name, None)
    return Response(status_code=204)
