"""Every refusal's machine word, with the HTTP status it is answered with.

The API answers every error as ``{"error": {"status", "code", "message"}}`` (``api/errors.py``);
``code`` is a member of :class:`ErrorCode`, and its status comes from the member, so a code is
never answered with two statuses. A :class:`~conveyor.errors.RejectedInput` carries one as its
``reason`` (the CLI prints it too). ``docs/http.md`` lists every member in its error table, and
a test holds the two in step both ways.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

__all__ = ["ErrorCode"]


class ErrorCode(StrEnum):
    """A stable word for programs; ``status`` is None for a refusal only the CLI can meet."""

    _value_: str
    status: int | None

    def __new__(cls, value: str, status: int | None) -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        return member

    # 400: the request cannot be read.
    BAD_REQUEST = "bad_request", 400
    BAD_JSON = "bad_json", 400
    BAD_CURSOR = "bad_cursor", 400
    BAD_MULTIPART = "bad_multipart", 400
    UNKNOWN_FIELD = "unknown_field", 400
    BAD_LAST_EVENT_ID = "bad_last_event_id", 400
    BAD_IDEMPOTENCY_KEY = "bad_idempotency_key", 400
    NO_FILE = "no_file", 400
    CLIENT_DISCONNECTED = "client_disconnected", 400
    # POST /v1/audio/transcriptions answers as OpenAI does: a refused field is 400.
    INVALID_FIELD = "invalid_field", 400
    NOT_TRANSCRIBABLE = "not_transcribable", 400
    # 401, 403: who is asking.
    UNAUTHORIZED = "unauthorized", 401
    INVALID_TOKEN = "invalid_token", 401
    FORBIDDEN = "forbidden", 403
    CSRF = "csrf", 403
    # 404-416: what is asked for.
    NOT_FOUND = "not_found", 404
    NO_TEXT = "no_text", 404
    METHOD_NOT_ALLOWED = "method_not_allowed", 405
    UPLOAD_TIMEOUT = "upload_timeout", 408
    FORM_TIMEOUT = "form_timeout", 408
    CONFLICT = "conflict", 409
    TOO_LARGE = "too_large", 413
    NOT_MEDIA = "not_media", 415
    RANGE_NOT_SATISFIABLE = "range_not_satisfiable", 416
    # 422: well-formed but unacceptable.
    INVALID_REQUEST = "invalid_request", 422
    EMPTY_FILE = "empty_file", 422
    TOO_MANY_TOPICS = "too_many_topics", 422
    UNKNOWN_LANGUAGE = "unknown_language", 422
    BAD_HINTS = "bad_hints", 422
    BAD_CHANNELS = "bad_channels", 422
    UNKNOWN_LANE = "unknown_lane", 422
    TOO_MANY_PIXELS = "too_many_pixels", 422
    UNDECODABLE = "undecodable", 422
    SHARE_WITH_OWNER = "share_with_owner", 422
    # 429: too much at once.
    TOO_MANY_UPLOADS = "too_many_uploads", 429
    TOO_MANY_STREAMS = "too_many_streams", 429
    HEADERS_TOO_LARGE = "headers_too_large", 431
    # 5xx: ours or the services'.
    INTERNAL = "internal", 500
    UNAVAILABLE = "unavailable", 503
    DATABASE_UNAVAILABLE = "database_unavailable", 503
    STORAGE_UNAVAILABLE = "storage_unavailable", 503
    STORAGE_FULL = "storage_full", 507
    SHUTTING_DOWN = "shutting_down", 503
    TRANSCRIPTION_FAILED = "transcription_failed", 502
    TRANSCRIPTION_PENDING = "transcription_pending", 504
    # Never over HTTP: the API refuses these inputs earlier (a schema, the token's user as the
    # owner) or has no route that takes them (users and passwords are the CLI's).
    NO_OWNER = "no_owner", None
    NO_NAME = "no_name", None
    BAD_NAME = "bad_name", None
    WEAK_PASSWORD = "weak_password", None
    BAD_PASSWORD = "bad_password", None
    BAD_EXPIRY = "bad_expiry", None
