"""OpenAI's speech-to-text route, served by Conveyor: existing clients use the durable pipeline.

``POST /v1/audio/transcriptions`` takes the multipart form OpenAI's API takes (the official SDKs,
note-taking and chat front-ends, home-automation bridges send it as they are), makes a record
like any upload (same bearer tokens, same owner, same history), waits for it to be transcribed
and answers in the ``response_format`` asked for. A record still being transcribed after
``[api] transcription_wait`` seconds is answered 504 with its id and address (and
``x-should-retry: false``, so an SDK does not upload it again): nothing is lost, its text is at
``/api/records/{id}/text`` when it is done.

Fields (text fields before ``file``, as the SDKs send them):

* ``file``: the recording (any format Conveyor takes; the content is sniffed);
* ``model``: required, any name (``GET /v1/models`` lists ``whisper-1`` and the installation's
  model): Conveyor recognises with the recognizer it is configured with, whatever is named;
* ``language``: ISO 639-1 code; default: detect;
* ``prompt``: vocabulary hints (names, terms), at most 1,000 characters;
* ``response_format``: ``json`` (default), ``text``, ``srt``, ``vtt``, ``verbose_json``;
* ``timestamp_granularities[]``: ``segment`` (default) and/or ``word``, with ``verbose_json``;
* ``temperature``, ``stream`` (false only), ``chunking_strategy``, ``include[]``: accepted and
  ignored (Conveyor's recognizer chooses its own decoding; nothing is streamed).

The same bytes sent again by the same owner are answered from the record that already holds
them (each file is kept once per owner), not transcribed a second time.

Refusals use Conveyor's error body, whose ``error.message`` is what the SDKs show.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import RowMapping

from conveyor.api.auth import Owner
from conveyor.api.errors import ApiError
from conveyor.api.schemas import ErrorBody
from conveyor.api.state import ApiState, State
from conveyor.api.text_formats import srt, vtt
from conveyor.api.uploads import Upload, receive_upload, upload_responses
from conveyor.audio import queries
from conveyor.audio.intake import MAX_HINTS, accept_audio, clean_language
from conveyor.audio.texts import export_text
from conveyor.error_codes import ErrorCode
from conveyor.errors import Duplicate

__all__ = ["FORMATS", "OPENAI_FIELDS", "router"]

router = APIRouter(prefix="/v1", tags=["openai"])

FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
GRANULARITIES = ("segment", "word")
OPENAI_FIELDS = frozenset(
    {
        "model",
        "language",
        "prompt",
        "response_format",
        "timestamp_granularities[]",
        "temperature",
        "stream",
        "chunking_strategy",
        "include[]",
    }
)
# Halts of a recording that is not one: the client's to fix (400); any other is ours (502).
_BAD_INPUT = frozenset({"not_audio", "undecodable", "no_audio", "empty_audio", "bad_sample_rate"})
_LOOK_EVERY = 0.25  # seconds between looks at the record while the request waits


def _models(state: ApiState) -> list[str]:
    runtime = state.runtime
    own = runtime.provider_backend.model(runtime.settings.transcription)
    return list(dict.fromkeys(["whisper-1", own]))


@router.get(
    "/models",
    summary="The models served (OpenAI-compatible)",
    responses={401: {"model": ErrorBody, "description": "No or unknown bearer token."}},
)
def list_models(state: State, owner: Owner) -> dict[str, Any]:
    """``{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}``:
    ``whisper-1`` (OpenAI's name, for clients that insist on it) and the installation's own
    model. Both are served by the configured recognizer."""
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "conveyor"}
            for name in _models(state)
        ],
    }


def _choices(upload: Upload) -> tuple[str, list[str], str | None, str | None]:
    """(response_format, granularities, language, hints) from the form, checked.

    Raises:
        ApiError: 400 ``invalid_field`` naming the field (OpenAI's status for it).
    """
    fields = upload.fields
    if not fields.get("model", "").strip():
        raise ApiError(ErrorCode.INVALID_FIELD, "model is required (any name: see /v1/models)")
    answer = fields.get("response_format", "json").strip() or "json"
    if answer not in FORMATS:
        raise ApiError(
            ErrorCode.INVALID_FIELD, f"response_format must be one of {', '.join(FORMATS)}"
        )
    listed = fields.get("timestamp_granularities[]", "")
    granularities = [g.strip() for g in listed.split(",") if g.strip()] or ["segment"]
    if any(g not in GRANULARITIES for g in granularities):
        raise ApiError(
            ErrorCode.INVALID_FIELD, "timestamp_granularities[] takes `segment` and `word`"
        )
    if fields.get("stream", "false").strip().lower() not in ("false", "0", ""):
        raise ApiError(ErrorCode.INVALID_FIELD, "stream is not supported; leave it false")
    language = clean_language(fields.get("language"))
    if language is not None and not (language.isascii() and language.isalpha()):
        raise ApiError(ErrorCode.INVALID_FIELD, "language is an ISO 639-1 code such as `en`")
    hints = fields.get("prompt") or None
    if hints is not None and len(hints) > MAX_HINTS:
        raise ApiError(
            ErrorCode.INVALID_FIELD, f"prompt is longer than {MAX_HINTS} characters (it is kept as "
            "the recording's vocabulary hints)"
        )  # fmt: skip
    return answer, granularities, language, hints


@router.post(
    "/audio/transcriptions",
    summary="Transcribe a recording (OpenAI-compatible)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file", "model"],
                        "properties": {
                            "model": {"type": "string"},
                            "language": {"type": "string"},
                            "prompt": {"type": "string", "maxLength": MAX_HINTS},
                            "response_format": {"type": "string", "enum": list(FORMATS)},
                            "timestamp_granularities[]": {
                                "type": "array",
                                "items": {"type": "string", "enum": list(GRANULARITIES)},
                            },
                            "temperature": {"type": "number"},
                            "file": {"type": "string", "format": "binary"},
                        },
                    }
                }
            },
        }
    },
    responses={
        **upload_responses("The content is not audio or video.", "Empty upload or invalid fields."),
        401: {"model": ErrorBody, "description": "No or unknown bearer token."},
        502: {"model": ErrorBody, "description": "The recognizer failed; the record is kept."},
        504: {
            "model": ErrorBody,
            "description": "Not transcribed within `[api] transcription_wait` s; the record "
            "goes on (its id and address are in the body and `Location`).",
        },
    },
)
async def create_transcription(request: Request, state: State, owner: Owner) -> Response:
    """Make a record of the recording, wait for its transcript, answer in the format asked."""
    runtime = state.runtime
    max_bytes = runtime.settings.api.max_upload_bytes
    chosen: dict[str, Any] = {}

    def accept(chunks: Any, upload: Upload) -> int:
        answer, granularities, language, hints = _choices(upload)
        chosen.update(answer=answer, granularities=granularities)
        return accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            chunks,
            owner=owner.name,
            original_name=upload.filename,
            title=upload.filename,
            language=language,
            strict=True,
            max_bytes=max_bytes,
            languages=runtime.languages,
            hints=hints,
            channels=runtime.settings.transcription.channels,
        )

    try:
        record_id = await receive_upload(
            request, accept, max_bytes=max_bytes, owner=owner.name, fields=OPENAI_FIELDS
        )
    except Duplicate as exc:
        # The same recording again: its record's transcript is the answer (kept once).
        record_id = exc.existing_id
    row = await _settled(state, record_id, owner.name)
    address = f"/api/records/{record_id}"
    if row["halted_at"] is not None:
        bad = row["halt_reason"] in _BAD_INPUT
        raise ApiError(
            ErrorCode.NOT_TRANSCRIBABLE if bad else ErrorCode.TRANSCRIPTION_FAILED,
            f"record {record_id} ({address}) was halted ({row['halt_reason']}): "
            f"{row['halt_error']}",
            headers={"Location": address, "x-should-retry": "false"},
        )
    if row["stage"] != "done":
        raise ApiError(
            ErrorCode.TRANSCRIPTION_PENDING,
            f"record {record_id} is still being transcribed (stage {row['stage']}); it goes "
            f"on: its text will be at {address}/text",
            headers={"Location": address, "x-should-retry": "false"},
        )
    with runtime.engine.connect() as conn:
        text = export_text(conn, record_id)
    return _answer(row, text, chosen["answer"], chosen["granularities"], address)


async def _settled(state: ApiState, record_id: int, owner: str) -> RowMapping:
    """The record once it is done or halted, or as it is after ``[api] transcription_wait``."""
    runtime = state.runtime
    ends = time.monotonic() + runtime.settings.api.transcription_wait

    def read() -> RowMapping | None:
        with runtime.engine.connect() as conn:
            return queries.record_by_id(conn, record_id, owner)

    while True:
        row = await anyio.to_thread.run_sync(read)
        if row is None:
            raise ApiError(ErrorCode.NOT_FOUND, f"record {record_id} was deleted meanwhile")
        if row["stage"] == "done" or row["halted_at"] is not None:
            return row
        if time.monotonic() >= ends:
            return row
        await anyio.sleep(_LOOK_EVERY)


def _answer(
    row: RowMapping,
    text: RowMapping | None,
    answer: str,
    granularities: list[str],
    address: str,
) -> Response:
    body = "" if text is None else str(text["body"])
    segments: list[dict[str, Any]] = [] if text is None else list(text["segments"] or [])
    headers = {"Location": address, "X-Conveyor-Record": str(row["id"])}
    if answer == "text":
        return PlainTextResponse(body + "\n" if body else "", headers=headers)
    if answer == "srt":
        return PlainTextResponse(srt(segments), headers=headers)
    if answer == "vtt":
        return PlainTextResponse(vtt(segments), media_type="text/vtt", headers=headers)
    if answer == "json":
        return JSONResponse({"text": body}, headers=headers)
    document: dict[str, Any] = {
        "task": "transcribe",
        "language": (text["language"] if text is not None else None) or "",
        "duration": float(row["duration"] or 0.0),
        "text": body,
    }
    if "segment" in granularities:
        document["segments"] = [
            {
                "id": index,
                "seek": 0,
                "start": float(s["start"]),
                "end": float(s["end"]),
                "text": " " + str(s["text"]).strip(),
                "tokens": [],
                "temperature": 0.0,
                "avg_logprob": 0.0,
                "compression_ratio": 0.0,
                "no_speech_prob": 0.0,
            }
            for index, s in enumerate(segments)
        ]
    if "word" in granularities:
        document["words"] = [
            {"word": str(w["text"]), "start": float(w["start"]), "end": float(w["end"])}
            for s in segments
            for w in s.get("words") or []
            if w.get("start") is not None and w.get("end") is not None
        ]
    return JSONResponse(document, headers=headers)
