"""``/api/records``: upload audio, read its card and text, edit the owner's fields (P7, P11)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import PlainTextResponse
from sqlalchemy import RowMapping
from sqlalchemy.exc import IntegrityError

from conveyor.api.auth import Owner
from conveyor.api.errors import ApiError
from conveyor.api.idempotency import IDEMPOTENCY_KEY, REPLAYED, IdempotentUpload
from conveyor.api.ids import RecordId
from conveyor.api.objects import object_response
from conveyor.api.record_choices import RECORD_FIELDS, record_choices
from conveyor.api.schemas import (
    PLAIN_TEXT,
    AudioStage,
    ErrorBody,
    RecordCard,
    RecordEvent,
    RecordPage,
    RecordPatch,
    TextJson,
    UploadedRecord,
)
from conveyor.api.state import ApiState, State
from conveyor.api.text_formats import srt, vtt
from conveyor.api.uploads import (
    Upload,
    keep_duplicate_chosen,
    receive_upload,
    sent_name,
    upload_responses,
)
from conveyor.audio import queries
from conveyor.audio.cards import hints_of, provider_wait, provider_waits, record_card
from conveyor.audio.deletion import delete_record
from conveyor.audio.intake import accept_audio
from conveyor.audio.search import MAX_QUERY, search_records
from conveyor.audio.texts import export_text
from conveyor.clock import iso_utc
from conveyor.error_codes import ErrorCode
from conveyor.errors import Duplicate, NotFound
from conveyor.limits import HINTS, RECORD_TITLE
from conveyor.objects import file_by_id
from conveyor.pipeline import resume

__all__ = ["UPLOAD_BODY", "card_of", "original_response", "router"]

router = APIRouter(prefix="/api/records", tags=["records"])

# Ids are 32-bit on PostgreSQL; a larger number can name nothing, so it is a bad request (422)
# rather than a database overflow.

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No or unknown bearer token."},
    404: {"model": ErrorBody, "description": "No such record of yours."},
    422: {"model": ErrorBody, "description": "Invalid fields."},
}

# A language code in any case, blanks around it allowed; it is stored lower case.
LANGUAGE_PATTERN = r"^\s*[A-Za-z]{2,3}\s*$"
LANGUAGE_HELP = "ISO 639-1 code such as `en` (any case; stored lower case); default: detect."

UPLOAD_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "title": {
                        "type": "string",
                        "maxLength": RECORD_TITLE.longest,
                        "pattern": RECORD_TITLE.pattern,
                    },
                    "language": {
                        "type": "string",
                        "pattern": LANGUAGE_PATTERN,
                        "description": LANGUAGE_HELP,
                    },
                    "hints": {
                        "type": "string",
                        "maxLength": HINTS.longest,
                        "pattern": HINTS.pattern,
                    },
                    "channels": {"type": "string", "enum": ["mix", "separate"]},
                    "file": {"type": "string", "format": "binary"},
                },
            },
            "encoding": {"file": {"contentType": "application/octet-stream"}},
        },
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    },
    "description": (
        "The recording: a multipart form with a `file` part (text parts `title`, `language`, "
        "`hints`, `channels` before it), or the raw file as the body. Streamed to storage; the "
        "content is sniffed."
    ),
}


def card_of(
    row: RowMapping, wait: Mapping[str, Any] | None, hints: str | None = None, *, now: float
) -> dict[str, Any]:
    """The card of a record row at ``now`` (epoch seconds), with links; ``wait`` is what
    :func:`~conveyor.audio.cards.provider_wait` read for it, ``hints`` the record's own
    vocabulary hints."""
    card = record_card(row, wait, now=now)
    card["hints"] = hints
    base = f"/api/records/{card['id']}"
    card["links"] = {
        "self": base,
        "text": f"{base}/text",
        "events": f"{base}/events",
        "original": f"{base}/original",
    }
    return card


def _own_record(state: ApiState, record_id: int, owner: str) -> RowMapping:
    with state.runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, record_id, owner)
    if row is None:
        raise NotFound(f"record {record_id} does not exist")
    return row


def _own_card(state: ApiState, record_id: int, owner: str) -> dict[str, Any]:
    """The card of the owner's record, read in one connection.

    Raises:
        NotFound: no such record of ``owner`` (or it was deleted meanwhile).
    """
    with state.runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, record_id, owner)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        return card_of(
            row,
            provider_wait(conn, row),
            hints_of(conn, int(row["id"])),
            now=state.runtime.clock.now(),
        )


# A cursor is the last id of the page, base64-wrapped; it is not signed. Any well-formed cursor
# is accepted (one naming another owner's id only sets where the owner's own list resumes);
# a malformed one is 400 `bad_cursor`.
def _encode_cursor(record_id: int) -> str:
    return base64.urlsafe_b64encode(f"r{record_id}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith("r") or not text[1:].isdigit():
            raise ValueError(cursor)
        value = int(text[1:])
        if not 1 <= value <= 2**31 - 1:
            raise ValueError(cursor)
        return value
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(
            ErrorCode.BAD_CURSOR, "the cursor is malformed; pass the `next_cursor` of a page"
        ) from None


@router.post(
    "",
    status_code=201,
    response_model=UploadedRecord,
    summary="Upload a recording",
    openapi_extra={"requestBody": UPLOAD_BODY},
    responses={
        200: {
            "model": UploadedRecord,
            "description": "You already had this content: the record that holds it "
            "(`duplicate: true`), nothing stored.",
        },
        **_ERRORS,
        **upload_responses("The content is not audio or video.", "Empty upload or invalid fields."),
    },
)
async def upload_record(
    request: Request,
    response: Response,
    state: State,
    owner: Owner,
    title: Annotated[
        str | None, Query(max_length=RECORD_TITLE.longest, pattern=RECORD_TITLE.pattern)
    ] = None,
    language: Annotated[
        str | None, Query(pattern=LANGUAGE_PATTERN, description=LANGUAGE_HELP)
    ] = None,
    name: Annotated[
        str | None,
        Query(max_length=300, pattern=PLAIN_TEXT, description="The file's name (raw bodies)."),
    ] = None,
    raw_pcm: Annotated[
        bool, Query(description="The body is headerless 16 kHz mono s16le PCM.")
    ] = False,
    idempotency_key: Annotated[str | None, IDEMPOTENCY_KEY] = None,
    hints: Annotated[
        str | None,
        Query(
            max_length=HINTS.longest,
            pattern=HINTS.pattern,
            description="Names and terms the speech contains (vocabulary hints).",
        ),
    ] = None,
    channels: Annotated[
        Literal["mix", "separate"] | None,
        Query(
            description="`separate`: recognise each channel (and audio track) on its own and "
            "label its segments; `mix`: hear them as one. Default: `[transcription] channels`.",
        ),
    ] = None,
    keep_duplicate: Annotated[
        bool,
        Query(description="Keep a second record of content you already have (same SHA-256)."),
    ] = False,
) -> dict[str, Any]:
    """Accept one recording: 201 with its card at stage `uploaded`.

    Content you already have as a record (same SHA-256) is kept once: 200 with that record's
    card and `duplicate: true`, nothing stored, unless `keep_duplicate=true`.

    Refused with nothing stored: an empty upload (422 `empty_file`), one larger than the limit
    (413), content that is neither audio nor video (415 `not_media`).
    """
    runtime = state.runtime
    max_bytes = runtime.settings.api.max_upload_bytes
    once = IdempotentUpload(idempotency_key, owner=owner.name, scope="records", target="record")
    earlier = await anyio.to_thread.run_sync(once.earlier, runtime.engine)
    if earlier is not None:
        return await _answer(state, response, earlier, owner.name, replayed=True)

    def accept(chunks: Iterator[bytes], upload: Upload) -> int:
        chosen = record_choices(
            upload,
            default_channels=runtime.settings.transcription.channels,
            title=title,
            language=language,
            hints=hints,
            channels=channels,
        )
        return accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            chunks,
            owner=owner.name,
            original_name=sent_name(request) if name else upload.filename,
            title=chosen.title,
            language=chosen.language,
            raw_pcm=raw_pcm,
            strict=True,
            max_bytes=max_bytes,
            languages=runtime.languages,
            on_insert=once.recorder(runtime.clock),
            hints=chosen.hints,
            channels=chosen.channels,
            keep_duplicate=keep_duplicate_chosen(upload, keep_duplicate),
        )

    try:
        record_id = await receive_upload(
            request, accept, max_bytes=max_bytes, owner=owner.name, fields=RECORD_FIELDS
        )
    except Duplicate as exc:
        # A racing retry with this request's Idempotency-Key finds the content its twin just
        # stored: it is a replay of that upload, not a duplicate.
        winner = await anyio.to_thread.run_sync(once.earlier, runtime.engine)
        if winner is not None:
            return await _answer(state, response, winner, owner.name, replayed=True)
        response.status_code = 200
        card = await _answer(state, response, exc.existing_id, owner.name, replayed=False)
        return {**card, "duplicate": True}
    except IntegrityError as exc:  # a concurrent retry with the same key created it first
        winner = await anyio.to_thread.run_sync(once.winner_of, runtime.engine, exc)
        return await _answer(state, response, winner, owner.name, replayed=True)
    return await _answer(state, response, record_id, owner.name, replayed=False)


async def _answer(
    state: ApiState, response: Response, record_id: int, owner: str, *, replayed: bool
) -> dict[str, Any]:
    card = await anyio.to_thread.run_sync(_own_card, state, record_id, owner)
    response.headers["Location"] = card["links"]["self"]
    if replayed:
        response.headers[REPLAYED] = "true"
    return {**card, "duplicate": False}


@router.get(
    "",
    response_model=RecordPage,
    summary="List your records",
    responses={
        **_ERRORS,
        400: {"model": ErrorBody, "description": "A malformed `cursor` (`bad_cursor`)."},
    },
)
def list_records(
    state: State,
    owner: Owner,
    stage: AudioStage | None = None,
    halted: Annotated[bool | None, Query(description="Only halted (true) or not (false).")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[
        str | None,
        Query(
            max_length=64,
            description="`next_cursor` of the previous page (a malformed one is 400).",
        ),
    ] = None,
    q: Annotated[
        str | None,
        Query(
            max_length=MAX_QUERY,
            description="Search titles, briefs, transcripts and corrections: the best "
            "`limit` matches, best first, with `hits` (no `cursor`).",
        ),
    ] = None,
) -> dict[str, Any]:
    """Your records, newest first, a page at a time; with ``q``, the ones that match it,
    best first, each with its snippet and the moment it is said (``hits``)."""
    if q is not None:
        if cursor is not None:
            raise ApiError(ErrorCode.BAD_REQUEST, "a search (q) has no further pages; drop cursor")
        return _search(state, owner.name, q, limit, stage, halted)
    after = _decode_cursor(cursor) if cursor is not None else None
    with state.runtime.engine.connect() as conn:
        rows = queries.list_records(
            conn, owner=owner.name, stage=stage, halted=halted, after_id=after, limit=limit + 1
        )
        page = rows[:limit]
        now = state.runtime.clock.now()
        waits = provider_waits(conn, page)
        hints = queries.bodies_of_kind(conn, [int(r["id"]) for r in page], "hints")
    more = len(rows) > limit
    return {
        "items": [
            card_of(r, waits.get(int(r["id"])), hints.get(int(r["id"])), now=now) for r in page
        ],
        "next_cursor": _encode_cursor(int(page[-1]["id"])) if more else None,
    }


def _search(
    state: ApiState, owner: str, q: str, limit: int, stage: str | None, halted: bool | None
) -> dict[str, Any]:
    hits = search_records(state.runtime.engine, owner, q, limit=limit)
    now = state.runtime.clock.now()
    items, found = [], []
    with state.runtime.engine.connect() as conn:
        for hit in hits:
            row = queries.record_by_id(conn, hit.record_id, owner)
            if row is None:
                continue
            if stage is not None and row["stage"] != stage:
                continue
            if halted is not None and (row["halted_at"] is not None) != halted:
                continue
            items.append(card_of(row, provider_wait(conn, row), now=now))
            found.append(hit.shown())
    return {"items": items, "next_cursor": None, "hits": found}


@router.get("/{record_id}", response_model=RecordCard, summary="A record's card", responses=_ERRORS)
def get_record(state: State, owner: Owner, record_id: RecordId) -> dict[str, Any]:
    """The card: stage, halt flag, reason and time, title, brief, duration, times, links."""
    return _own_card(state, record_id, owner.name)


@router.patch(
    "/{record_id}",
    response_model=RecordCard,
    summary="Edit title and brief",
    responses={
        **_ERRORS,
        400: {"model": ErrorBody, "description": "Body is not JSON."},
        413: {"model": ErrorBody, "description": "A body over 1 MiB."},
    },
)
def patch_record(
    state: State, owner: Owner, record_id: RecordId, patch: RecordPatch
) -> dict[str, Any]:
    """Set the owner's fields (P7): fields sent are written (null clears), others kept."""
    values = {name: getattr(patch, name) for name in patch.model_fields_set}
    with state.runtime.engine.begin() as conn:
        if not queries.update_owner_fields(conn, record_id, owner.name, values):
            raise NotFound(f"record {record_id} does not exist")
        row = queries.record_by_id(conn, record_id, owner.name)
        if row is None:  # deleted between the update and the read
            raise NotFound(f"record {record_id} does not exist")
        return card_of(
            row,
            provider_wait(conn, row),
            hints_of(conn, int(row["id"])),
            now=state.runtime.clock.now(),
        )


_TEXT_TYPES = {
    "text": "text/plain; charset=utf-8",
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
}


@router.get(
    "/{record_id}/text",
    summary="The record's text",
    responses={
        200: {
            "description": "The transcript in the format asked for.",
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/json": {"schema": {"$ref": "#/components/schemas/TextJson"}},
                "application/x-subrip": {"schema": {"type": "string"}},
                "text/vtt": {"schema": {"type": "string"}},
            },
        },
        **_ERRORS,
        404: {"model": ErrorBody, "description": "No such record, or no text yet (`no_text`)."},
    },
    response_model=None,
)
def get_text(
    state: State,
    owner: Owner,
    record_id: RecordId,
    format: Annotated[Literal["text", "json", "srt", "vtt"], Query()] = "text",
) -> Response:
    """The transcript (P11): plain text, or JSON with segment times, SRT or WebVTT.

    When you saved a correction (`PUT .../proofread`), every format gives it instead.

    404 `no_text` until the record reaches `done` (the message says where it is).
    """
    with state.runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, record_id, owner.name)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        text = export_text(conn, record_id)
    if text is None:
        where = (
            f"it is halted at {row['stage']} ({row['halt_reason']})"
            if row["halted_at"] is not None
            else f"it is at stage {row['stage']}"
        )
        raise ApiError(ErrorCode.NO_TEXT, f"record {record_id} has no text yet; {where}")
    segments: list[dict[str, Any]] = list(text["segments"] or [])
    if format == "json":
        body = TextJson(
            record_id=record_id,
            kind=text["kind"],
            language=text["language"],
            no_speech=bool(row["no_speech"]),
            text=text["body"],
            segments=segments,  # type: ignore[arg-type]
        )
        return Response(body.model_dump_json(), media_type="application/json")
    rendered = {"text": str(text["body"]), "srt": srt(segments), "vtt": vtt(segments)}[format]
    return PlainTextResponse(rendered, media_type=_TEXT_TYPES[format])


@router.get(
    "/{record_id}/events",
    response_model=list[RecordEvent],
    summary="The record's history",
    responses=_ERRORS,
)
def get_events(state: State, owner: Owner, record_id: RecordId) -> list[dict[str, Any]]:
    """Every event of the record, oldest first (D14): intake, each step, halts, resumes."""
    with state.runtime.engine.connect() as conn:
        if queries.record_by_id(conn, record_id, owner.name) is None:
            raise NotFound(f"record {record_id} does not exist")
        rows = queries.events_of(conn, record_id)
    return [
        {
            "id": r["id"],
            "stage": r["stage"],
            "outcome": r["outcome"],
            "outcome_text": r["outcome_text"],
            "origin": r["origin"],
            "created_at": iso_utc(r["created_at"]),
        }
        for r in rows
    ]


@router.head("/{record_id}/original", include_in_schema=False)
@router.get(
    "/{record_id}/original",
    summary="The uploaded file",
    response_class=Response,
    responses={
        200: {
            "description": "The original bytes, with the MIME type sniffed at intake.",
            "content": {"*/*": {}},
        },
        206: {"description": "The requested byte range."},
        304: {"description": "Not modified (If-None-Match)."},
        416: {"model": ErrorBody, "description": "Range outside the file."},
        **_ERRORS,
    },
)
def get_original(request: Request, state: State, owner: Owner, record_id: RecordId) -> Response:
    """The original upload, unchanged (ETag, Range)."""
    return original_response(request, state, record_id, owner.name)


def original_response(request: Request, state: ApiState, record_id: int, owner: str) -> Response:
    """The original upload of ``owner``'s record (ETag, Range); NotFound otherwise."""
    row = _own_record(state, record_id, owner)
    with state.runtime.engine.connect() as conn:
        file_row = file_by_id(conn, int(row["original_file_id"]))
    if file_row is None:
        raise NotFound(f"record {record_id} has no stored original")
    runtime = state.runtime
    return object_response(
        request,
        runtime.store,
        file_row,
        filename=row["original_name"],
        presign=runtime.presign_expires,
    )


@router.delete(
    "/{record_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a record",
    responses={401: _ERRORS[401], 422: _ERRORS[422]},
)
def delete_record_route(state: State, owner: Owner, record_id: RecordId) -> Response:
    """Delete the record, its texts and history rows, and every stored object (original,
    normalized audio, raw responses). A step running on it writes nothing afterwards.

    204 whether the record existed or not (deleting is idempotent; another owner's record is
    left alone and answers the same).
    """
    runtime = state.runtime
    delete_record(runtime.engine, runtime.store, runtime.clock, record_id, owner=owner.name)
    return Response(status_code=204)


@router.post(
    "/{record_id}/resume",
    response_model=RecordCard,
    summary="Resume a halted record",
    responses={**_ERRORS, 409: {"model": ErrorBody, "description": "The record is not halted."}},
)
def resume_record(state: State, owner: Owner, record_id: RecordId) -> dict[str, Any]:
    """Continue a halted record from the stage it reached (P9); 409 when it is not halted."""
    runtime = state.runtime
    _own_record(state, record_id, owner.name)
    resume(runtime.engine, runtime.audio, record_id, clock=runtime.clock)
    return _own_card(state, record_id, owner.name)
