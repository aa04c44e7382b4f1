"""Recordings: the live list, uploads, the record page, edits, proofreading, downloads, resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import urlencode

import anyio.to_thread
from fastapi import APIRouter, Form, Header, Path, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, StreamingResponse
from sqlalchemy import Connection
from starlette.responses import Response

from conveyor.api.objects import object_response
from conveyor.api.record_choices import RECORD_FIELDS, record_choices
from conveyor.api.state import ApiState, State
from conveyor.api.text_formats import srt, vtt
from conveyor.api.uploads import Upload, keep_duplicate_chosen, receive_upload
from conveyor.audio import queries as audio_queries
from conveyor.audio.intake import CHANNEL_CHOICES, MAX_HINTS, accept_audio
from conveyor.audio.stages import AUDIO
from conveyor.audio.texts import (
    MAX_TOPICS,
    PROOFREAD,
    TRANSCRIPT,
    export_text,
    owner_topics,
    record_topics,
    save_proofread,
    set_topics,
)
from conveyor.audio.vocabulary import owner_vocabulary
from conveyor.db.ids import RECORD_EVENT
from conveyor.errors import Conflict, Duplicate, NotFound, RejectedInput
from conveyor.limits import RECORD_BRIEF, RECORD_TITLE
from conveyor.objects import file_by_id
from conveyor.pipeline import resume
from conveyor.web import queries
from conveyor.web.auth import Csrf, CsrfHeader, Viewer
from conveyor.web.ids import RecordId
from conveyor.web.pages import render
from conveyor.web.streams import journal_reader, page_stream_response, start_point
from conveyor.web.views import record_status, record_statuses

__all__ = ["PAGE_SIZE", "UPLOAD_FIELDS", "router"]

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50


def _record_row(state: ApiState, record_id: int, owner: str) -> dict[str, Any]:
    with state.runtime.engine.connect() as conn:
        row = audio_queries.record_by_id(conn, record_id, owner)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        return record_status(conn, state.runtime.audio, row, state.runtime.clock.now())


@router.get("/")
def home() -> Response:
    """The recordings list is the home page."""
    return RedirectResponse("/records", status_code=303)


# The filter form sends an empty value for "all" / "any".
Show = Annotated[str | None, Query(pattern="^(waiting|done|halted)?$")]
# Derived from the audio declaration (D11): a new stage is in the dropdown and accepted here.
StageFilter = Annotated[str | None, Query(pattern=f"^({'|'.join(AUDIO.stage_names)})?$")]


_CHANNEL_WORDS = {
    "mix": "mix: all channels heard as one",
    "separate": "separate: each channel on its own, its lines labelled",
}


@router.get("/records")
def records_page(
    request: Request,
    state: State,
    viewer: Viewer,
    before: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    show: Show = None,
    stage: StageFilter = None,
    deleted: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    """Your recordings, newest first, :data:`PAGE_SIZE` a page (``?before=ID`` for older),
    filtered by ``show`` (``waiting``, ``done``, ``halted``) and ``stage``; the counts per
    state above the list follow the live stream."""
    show, stage = show or None, stage or None
    runtime = state.runtime
    now = runtime.clock.now()
    with runtime.engine.connect() as conn:
        last_event_id = queries.latest_audio_event_id(conn)
        rows = queries.records_page(
            conn, viewer.name, state=show, stage=stage, before=before, limit=PAGE_SIZE + 1
        )
        records = record_statuses(conn, runtime.audio, rows[:PAGE_SIZE], now)
        counts = queries.record_counts(conn, viewer.name)
        vocabulary = owner_vocabulary(conn, viewer.name)
    older = records[-1]["id"] if len(rows) > PAGE_SIZE else None
    default_channels = runtime.settings.transcription.channels
    filters = {k: v for k, v in (("show", show), ("stage", stage)) if v}
    return render(
        request,
        "records.html",
        {
            "records": records,
            "counts": counts,
            "older": older,
            "first_page": before is None,
            "last_event_id": last_event_id,
            "deleted": deleted,
            "show": show,
            "stage": stage,
            "filters": urlencode(filters),
            "stages": [s.name for s in runtime.audio.stages],
            "max_hints": MAX_HINTS,
            "vocabulary": vocabulary,
            "default_channels": default_channels,
            "channel_choices": [
                (value, _CHANNEL_WORDS[value] + (" (default)" if value == default_channels else ""))
                for value in CHANNEL_CHOICES
            ],
        },
    )


@router.get("/records/counts")
def records_counts(request: Request, state: State, viewer: Viewer) -> Response:
    """The counts above the list (swapped in when a record changes)."""
    with state.runtime.engine.connect() as conn:
        counts = queries.record_counts(conn, viewer.name)
    return render(request, "_record_counts.html", {"counts": counts})


# The page's upload options (a title would name every dropped file alike, so it has none).
UPLOAD_FIELDS = (RECORD_FIELDS - {"title"}) | {"keep_duplicate"}


@router.post("/records/upload")
async def upload_recording(request: Request, state: State, viewer: CsrfHeader) -> Response:
    """One file per request (the page sends each dropped file on its own, with progress).

    Text parts before ``file``: ``language`` (ISO 639-1; absent = detect), ``hints`` (at most
    1,000 characters), ``channels`` (``mix`` / ``separate``; absent = ``[transcription]
    channels``), checked as ``POST /api/records`` checks them (:func:`record_choices`);
    ``keep_duplicate`` (``true``: keep a second copy of a file the viewer already has).

    201 ``{"id", "url"}``; a file the viewer already has (same SHA-256) is not stored again:
    200 ``{"id", "url", "duplicate": true}`` naming the record that holds it. A refused file
    answers the API's error shape with its status (422 for an invalid option, 400
    ``unknown_field`` for another field), nothing stored.
    """
    runtime = state.runtime
    max_bytes = runtime.settings.api.max_upload_bytes

    def accept(chunks: Iterator[bytes], upload: Upload) -> int:
        chosen = record_choices(upload, default_channels=runtime.settings.transcription.channels)
        return accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            chunks,
            owner=viewer.name,
            original_name=upload.filename,
            title=None,
            language=chosen.language,
            raw_pcm=False,
            strict=True,
            max_bytes=max_bytes,
            languages=runtime.languages,
            hints=chosen.hints,
            channels=chosen.channels,
            keep_duplicate=keep_duplicate_chosen(upload),
        )

    try:
        record_id = await receive_upload(
            request, accept, max_bytes=max_bytes, owner=viewer.name, fields=UPLOAD_FIELDS
        )
    except Duplicate as exc:
        url = f"/records/{exc.existing_id}"
        return JSONResponse({"id": exc.existing_id, "url": url, "duplicate": True})
    return JSONResponse({"id": record_id, "url": f"/records/{record_id}"}, status_code=201)


@router.get("/records/events")
async def records_events(
    state: State,
    viewer: Viewer,
    record: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    last_event_id: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    last_event_id_header: Annotated[
        str | None, Header(alias="Last-Event-ID", max_length=40)
    ] = None,
) -> StreamingResponse:
    """Live changes of your recordings (or of one), resumable after the last id seen."""
    runtime = state.runtime

    def latest() -> int:
        with runtime.engine.connect() as conn:
            return queries.latest_audio_event_id(conn)

    start = await anyio.to_thread.run_sync(
        start_point, last_event_id_header, last_event_id, latest, RECORD_EVENT
    )
    return page_stream_response(
        state,
        viewer.session_id,
        journal_reader(runtime.engine, viewer.name, record),
        start,
        poll_interval=state.broadcast.poll_interval,
    )


@router.get("/records/{record_id}/row")
def record_row(request: Request, state: State, viewer: Viewer, record_id: RecordId) -> Response:
    """One row of the list (the page swaps it in when the record changes)."""
    record = _record_row(state, record_id, viewer.name)
    return render(request, "_record_row.html", {"r": record})


@router.get("/records/{record_id}/status")
def record_status_part(
    request: Request, state: State, viewer: Viewer, record_id: RecordId
) -> Response:
    """The status box of a record page (swapped in live)."""
    record = _record_row(state, record_id, viewer.name)
    return render(request, "_record_status.html", {"r": record})


@router.get("/records/{record_id}")
def record_page(
    request: Request,
    state: State,
    viewer: Viewer,
    record_id: RecordId,
    saved: Annotated[str | None, Query(max_length=20)] = None,
    error: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    """Player, timed transcript, edits, topics, correction, downloads; status live."""
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        # The stream's start first: a change after it reaches the page, never missed.
        last_event_id = queries.latest_audio_event_id(conn)
        row = audio_queries.record_by_id(conn, record_id, viewer.name)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        record = record_status(conn, state.runtime.audio, row, runtime.clock.now())
        text = _text_context(conn, record_id)
        topics = record_topics(conn, record_id)
        hints = [t["body"] for t in audio_queries.texts_of(conn, record_id) if t["kind"] == "hints"]
    dictionary = owner_topics(runtime.engine, viewer.name)
    return render(
        request,
        "record.html",
        {
            "r": record,
            **text,
            "topics": topics,
            "dictionary": [t for t in dictionary if t not in topics],
            "max_topics": MAX_TOPICS,
            # What the owner chose at upload; a record from before the choice follows the
            # setting.
            "choices": {
                "language": row["language"],
                "channels": row["channels"] or runtime.settings.transcription.channels,
                "hints": hints[0] if hints else None,
            },
            "last_event_id": last_event_id,
            "saved": saved,
            "error": error,
        },
    )


def _text_context(conn: Connection, record_id: int) -> dict[str, Any]:
    """``text`` (the correction, else the transcript, else None), its ``segments`` (a text
    without times is one segment), and whether it is the ``proofread`` one."""
    text = export_text(conn, record_id)
    segments: list[dict[str, Any]] = []
    if text is not None:
        segments = list(text["segments"] or []) or [
            {"start": 0.0, "end": 0.0, "text": str(text["body"])}
        ]
    return {
        "text": text,
        "segments": segments,
        "proofread": text is not None and text["kind"] == PROOFREAD,
    }


@router.get("/records/{record_id}/text")
def record_text_part(
    request: Request, state: State, viewer: Viewer, record_id: RecordId
) -> Response:
    """The transcript and the correction form (the record page swaps them in when the
    transcript arrives, without a reload that would stop the player)."""
    with state.runtime.engine.connect() as conn:
        row = audio_queries.record_by_id(conn, record_id, viewer.name)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        context = _text_context(conn, record_id)
    return render(request, "_record_text_live.html", {"r": {"id": record_id}, **context})


def _back(record_id: int, *, saved: str | None = None, error: str | None = None) -> Response:
    query = urlencode({k: v for k, v in (("saved", saved), ("error", error)) if v})
    return RedirectResponse(f"/records/{record_id}{'?' + query if query else ''}", 303)


@router.post("/records/{record_id}/details")
def record_details(
    state: State,
    viewer: Csrf,
    record_id: RecordId,
    title: Annotated[str, Form(max_length=RECORD_TITLE.longest)] = "",
    brief: Annotated[str, Form(max_length=RECORD_BRIEF.longest)] = "",
) -> Response:
    """Save title and brief (P7: the owner's fields; blank clears)."""
    values = {"title": title.strip() or None, "brief": brief.strip() or None}
    for field, limit in (("title", RECORD_TITLE), ("brief", RECORD_BRIEF)):
        problem = limit.problem(values[field] or "")
        if problem is not None:
            return _back(record_id, error=f"The {field} {problem}.")
    with state.runtime.engine.begin() as conn:
        if not audio_queries.update_owner_fields(conn, record_id, viewer.name, values):
            raise NotFound(f"record {record_id} does not exist")
    return _back(record_id, saved="details")


@router.post("/records/{record_id}/topics")
async def record_topics_form(
    request: Request, state: State, viewer: Csrf, record_id: RecordId
) -> Response:
    """Set the record's topics: the ticked ones of the dictionary plus new names (D9)."""
    form = await request.form()
    names = [v for v in form.getlist("topic") if isinstance(v, str)]
    new = form.get("new_topics")
    if isinstance(new, str):
        names += [n for n in new.split(",") if n.strip()]
    try:
        await anyio.to_thread.run_sync(
            set_topics, state.runtime.engine, record_id, viewer.name, names
        )
    except RejectedInput as exc:
        return _back(record_id, error=str(exc))
    return _back(record_id, saved="topics")


@router.post("/records/{record_id}/proofread")
async def record_proofread(
    request: Request, state: State, viewer: Csrf, record_id: RecordId
) -> Response:
    """Save the corrected transcript (kind ``proofread``, never overwritten by the pipeline)."""
    form = await request.form()
    segments = [v for v in form.getlist("segment") if isinstance(v, str)]
    runtime = state.runtime
    try:
        await anyio.to_thread.run_sync(
            save_proofread, runtime.engine, runtime.clock, record_id, viewer.name, segments
        )
    except (RejectedInput, Conflict) as exc:
        return _back(record_id, error=str(exc))
    return _back(record_id, saved="proofread")


@router.post("/records/{record_id}/resume")
def record_resume(state: State, viewer: Csrf, record_id: RecordId) -> Response:
    """Resume a halted record from its stage (P9)."""
    runtime = state.runtime
    _record_row(state, record_id, viewer.name)
    try:
        resume(runtime.engine, runtime.audio, record_id, clock=runtime.clock)
    except Conflict:
        return _back(record_id, error="It is not halted any more.")
    return _back(record_id, saved="resumed")


@router.get("/records/{record_id}/audio")
def record_audio(request: Request, state: State, viewer: Viewer, record_id: RecordId) -> Response:
    """What the player plays: the normalized audio once it exists, else the upload."""
    runtime = state.runtime
    with runtime.engine.connect() as conn:
        row = audio_queries.record_by_id(conn, record_id, viewer.name)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        file_id = row["normalized_file_id"] or row["original_file_id"]
        file_row = file_by_id(conn, int(file_id))
    if file_row is None:
        raise NotFound(f"record {record_id} has no stored audio")
    return object_response(request, runtime.store, file_row, presign=runtime.presign_expires)


_DOWNLOADS = {
    "txt": "text/plain; charset=utf-8",
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
    "json": "application/json",
}


@router.get("/records/{record_id}/download/{fmt}")
def record_download(
    state: State,
    viewer: Viewer,
    record_id: RecordId,
    fmt: Annotated[str, Path(pattern="^(txt|srt|vtt|json)$")],
) -> Response:
    """The text as a file: the correction when there is one, else the transcript."""
    with state.runtime.engine.connect() as conn:
        row = audio_queries.record_by_id(conn, record_id, viewer.name)
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        text = export_text(conn, record_id)
    if text is None:
        raise NotFound(f"record {record_id} has no text yet")
    segments: list[dict[str, Any]] = list(text["segments"] or [])
    if fmt == "json":
        body = json.dumps(
            {
                "record_id": record_id,
                "kind": text["kind"],
                "language": text["language"],
                "no_speech": bool(row["no_speech"]),
                "text": text["body"],
                "segments": segments,
            },
            ensure_ascii=False,
        )
    else:
        body = {"txt": str(text["body"]), "srt": srt(segments), "vtt": vtt(segments)}[fmt]
    stem = f"record-{record_id}" + ("-proofread" if text["kind"] != TRANSCRIPT else "")
    return PlainTextResponse(
        body,
        media_type=_DOWNLOADS[fmt],
        headers={"Content-Disposition": f'attachment; filename="{stem}.{fmt}"'},
    )
