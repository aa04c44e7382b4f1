"""A record's proofread correction and topics (D1, D9, P7): the owner's additions to a record."""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import APIRouter, Response

from conveyor.api.auth import Owner
from conveyor.api.ids import RecordId
from conveyor.api.schemas import ErrorBody, Proofread, TextJson, Topics
from conveyor.api.state import State
from conveyor.audio import queries
from conveyor.audio.texts import (
    clear_proofread,
    owner_topics,
    record_topics,
    save_proofread,
    set_topics,
)
from conveyor.errors import NotFound

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["records"])


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No or unknown bearer token."},
    404: {"model": ErrorBody, "description": "No such record of yours."},
    422: {"model": ErrorBody, "description": "Invalid fields."},
}


@router.put(
    "/records/{record_id}/proofread",
    response_model=TextJson,
    summary="Save your correction of the transcript",
    responses={
        **_ERRORS,
        400: {"model": ErrorBody, "description": "Body is not JSON."},
        409: {"model": ErrorBody, "description": "No transcript to correct yet."},
    },
)
def put_proofread(
    state: State, owner: Owner, record_id: RecordId, body: Proofread
) -> dict[str, Any]:
    """Store the corrected words, one text per transcript segment, as a text of kind
    `proofread` (D1). The pipeline never overwrites it (P7); `/text` exports use it."""
    runtime = state.runtime
    saved = save_proofread(runtime.engine, runtime.clock, record_id, owner.name, body.segments)
    with runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, record_id, owner.name)
    if row is None:  # deleted between the save and this read
        raise NotFound(f"record {record_id} does not exist")
    return {
        "record_id": record_id,
        "kind": saved["kind"],
        "language": row["detected_language"] or row["language"],
        "no_speech": bool(row["no_speech"]),
        "text": saved["text"],
        "segments": saved["segments"],
    }


@router.delete(
    "/records/{record_id}/proofread",
    status_code=204,
    response_class=Response,
    summary="Drop your correction",
    responses={401: _ERRORS[401], 422: _ERRORS[422]},
)
def delete_proofread(state: State, owner: Owner, record_id: RecordId) -> Response:
    """Exports use the pipeline's transcript again. 204 whether or not there was one, like every
    deletion (idempotent): another owner's record is left alone and answers the same."""
    with contextlib.suppress(NotFound):
        clear_proofread(state.runtime.engine, record_id, owner.name)
    return Response(status_code=204)


@router.get(
    "/records/{record_id}/topics",
    response_model=Topics,
    summary="A record's topics",
    responses=_ERRORS,
)
def get_topics(state: State, owner: Owner, record_id: RecordId) -> dict[str, Any]:
    """The record's topics in order (D9)."""
    with state.runtime.engine.connect() as conn:
        if queries.record_by_id(conn, record_id, owner.name) is None:
            raise NotFound(f"record {record_id} does not exist")
        return {"topics": record_topics(conn, record_id)}


@router.put(
    "/records/{record_id}/topics",
    response_model=Topics,
    summary="Set a record's topics",
    responses={**_ERRORS, 400: {"model": ErrorBody, "description": "Body is not JSON."}},
)
def put_topics(state: State, owner: Owner, record_id: RecordId, body: Topics) -> dict[str, Any]:
    """Up to five topics (D9), from your dictionary or new to it; `[]` clears them."""
    names = set_topics(state.runtime.engine, record_id, owner.name, body.topics)
    return {"topics": names}


@router.get(
    "/topics",
    response_model=list[str],
    summary="Your topic dictionary",
    responses={401: _ERRORS[401]},
)
def list_topics(state: State, owner: Owner) -> list[str]:
    """Every topic you have used, by name (D9)."""
    return owner_topics(state.runtime.engine, owner.name)
