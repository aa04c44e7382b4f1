"""One JSON error shape for every refusal, and the map from Conveyor's errors to statuses.

Every error body is::

    {"error": {"status": 404, "code": "not_found", "message": "record 7 does not exist"}}

``code`` is a stable machine word (the ``reason`` of a :class:`~conveyor.errors.RejectedInput`
where there is one); ``message`` is a sentence for people; 422 validation errors add
``details`` (one entry per bad field). Statuses:

=====  ==========================================================================
400    malformed request: JSON or multipart that does not parse, a bad cursor
401    no bearer token, or one we do not know (with ``WWW-Authenticate: Bearer``)
404    no such record, item, album or file *for this owner* (never revealed)
409    the action does not fit the state: resuming what is not halted, a name taken
413    upload larger than ``[api] max_upload_bytes``, any other body over 1 MiB (from
       Content-Length or while streaming)
415    content that is not media (sniffed, never from the name or Content-Type)
416    a byte range outside the file
422    well-formed but unacceptable: a field out of range, an empty upload, an image
       too large in pixels, an upload whose header cannot be read
500    a fault of ours; the message says nothing about it, the log says everything
503    the database does not answer (``database_unavailable``, with ``Retry-After``; ``/healthz``
       says ``unavailable``); the object store does not answer (``storage_unavailable``, with
       ``Retry-After``); an upload cut off by a server stop (``shutting_down``)
507    the storage has no room for an upload (``storage_full``: its disk or quota is full, or
       it cannot take a file this large)
=====  ==========================================================================
"""

from __future__ import annotations

import logging
import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from conveyor.api.ids import NO_SUCH_ID
from conveyor.db import outage
from conveyor.error_codes import ErrorCode
from conveyor.errors import Conflict, NotFound, RejectedInput
from conveyor.objects.outage import STORAGE
from conveyor.objects.store import StorageFull, full_storage

__all__ = [
    "RETRY_AFTER_OUTAGE",
    "ApiError",
    "error_response",
    "install_error_handlers",
    "storage_full_response",
    "storage_unavailable_response",
    "unavailable_response",
]

log = logging.getLogger("conveyor.api")

# The code Starlette's own refusals (no route, wrong method, an unparsable form) are answered with.
_BY_STATUS = {
    code.status: code
    for code in (
        ErrorCode.BAD_REQUEST,
        ErrorCode.NOT_FOUND,
        ErrorCode.METHOD_NOT_ALLOWED,
        # Only a web form's body that did not arrive in time (conveyor.web.gate).
        ErrorCode.FORM_TIMEOUT,
        ErrorCode.TOO_LARGE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INTERNAL,
        ErrorCode.UNAVAILABLE,
    )
}


class ApiError(Exception):
    """A refusal raised inside the API layer itself (bad cursor, malformed multipart, 401).

    Args:
        code: a stable machine word; its HTTP status is ``code.status``.
        message: a sentence for people.
        headers: extra response headers (``WWW-Authenticate``, ``Content-Range``).
    """

    def __init__(
        self, code: ErrorCode, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = code.status or 400
        self.code = code
        self.message = message
        self.headers = headers or {}


def error_response(
    code: ErrorCode,
    message: str,
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    details: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    """The JSON error body of ``code``, with its status (or ``status``, for a refusal of
    Starlette's own that no code names)."""
    status = status or code.status or 422
    body: dict[str, Any] = {"status": status, "code": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _details(exc: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc", ())]
        out.append({"field": ".".join(loc), "message": str(err.get("msg", "invalid"))})
    return out


async def _on_api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.code, exc.message, headers=exc.headers)


async def _on_not_found(_request: Request, exc: Exception) -> JSONResponse:
    return error_response(ErrorCode.NOT_FOUND, str(exc))


async def _on_conflict(_request: Request, exc: Exception) -> JSONResponse:
    return error_response(ErrorCode.CONFLICT, str(exc))


async def _on_rejected(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RejectedInput)
    return error_response(exc.reason, str(exc))


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return error_response(ErrorCode.BAD_JSON, "the request body is not valid JSON")
    # An id no row can have is missing, not malformed (conveyor.api.ids): answered as an id no
    # row has is, 404, or 204 by a DELETE (every one is idempotent: gone is what was asked).
    missing = [e for e in exc.errors() if e.get("type") == NO_SUCH_ID]
    if missing and request.method == "DELETE" and len(missing) == len(exc.errors()):
        return Response(status_code=204)
    if missing:
        return error_response(ErrorCode.NOT_FOUND, str(missing[0].get("msg", "not found")))
    return error_response(
        ErrorCode.INVALID_REQUEST, "the request has invalid fields", details=_details(exc)
    )


def _allowed_methods(request: Request) -> str:
    """Every method the schema documents for this path (Starlette names only the first
    matching route's)."""
    methods: set[str] = set()
    path = request.url.path
    for template, operations in request.app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\{[^}:]+:path\}", ".+", template)
        pattern = re.sub(r"\{[^}]+\}", "[^/]+", pattern)
        if re.fullmatch(pattern, path):
            methods |= {m.upper() for m in operations}
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(sorted(methods))


# What json.loads raises for a body it cannot parse besides JSONDecodeError (a ValueError too):
# UnicodeDecodeError, the integer digit limit's ValueError, RecursionError for deep nesting.
_JSON_FAILURES = (ValueError, RecursionError)


def _is_form(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind in ("multipart/form-data", "application/x-www-form-urlencoded")


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        allowed = _allowed_methods(request)
        return error_response(
            ErrorCode.METHOD_NOT_ALLOWED,
            f"this route takes {allowed}",
            headers={"Allow": allowed},
        )
    status = exc.status_code
    if status == 400 and isinstance(exc.__cause__, _JSON_FAILURES) and not _is_form(request):
        # FastAPI answers only a JSONDecodeError as invalid JSON; bytes that are not UTF-8, an
        # integer of too many digits or nesting past the parser's depth are a body that does
        # not parse as much.
        return error_response(ErrorCode.BAD_JSON, "the request body is not valid JSON")
    code = _BY_STATUS.get(status, ErrorCode.BAD_REQUEST if status < 500 else ErrorCode.INTERNAL)
    message = exc.detail if isinstance(exc.detail, str) else code.value
    if status == 404 and message == "Not Found":
        message = "no such route"
    return error_response(code, message, status=status, headers=dict(exc.headers or {}))


async def _on_data_error(request: Request, exc: Exception) -> JSONResponse:
    # A value the database refuses (NUL in text, a number out of range) that validation let
    # through: the request's fault, not ours, but logged so the validation can be tightened.
    log.warning("%s %s: the database refused a value: %s", request.method, request.url.path, exc)
    return error_response(ErrorCode.INVALID_REQUEST, "a value in the request cannot be stored")


#: Seconds a client is asked to wait before retrying while the database is unreachable.
RETRY_AFTER_OUTAGE = 5


def unavailable_response() -> JSONResponse:
    """503 ``database_unavailable`` with ``Retry-After``: the database does not answer."""
    return error_response(
        ErrorCode.DATABASE_UNAVAILABLE,
        "the database does not answer right now; nothing was changed, try again shortly",
        headers={"Retry-After": str(RETRY_AFTER_OUTAGE)},
    )


async def _on_database_error(request: Request, exc: Exception) -> JSONResponse:
    # One log line per outage per process (conveyor.db.outage), not a traceback per request.
    if outage.DATABASE.failed(exc, "API"):
        return unavailable_response()
    return await _on_unexpected(request, exc)


def storage_unavailable_response() -> JSONResponse:
    """503 ``storage_unavailable`` with ``Retry-After``: the object store does not answer."""
    return error_response(
        ErrorCode.STORAGE_UNAVAILABLE,
        "the storage does not answer right now; nothing was kept, try again shortly",
        headers={"Retry-After": str(RETRY_AFTER_OUTAGE)},
    )


def storage_full_response(full: StorageFull) -> JSONResponse:
    """507 ``storage_full``: the storage has no room for the upload (RFC 4918: the server
    cannot store what the request needs; temporary). No ``Retry-After``: space comes back when
    the operator frees it, not in seconds. The path is not said: it is the operator's."""
    if full.no_room:
        message = (
            "the storage is full: it has no space left for this upload; nothing was kept, "
            "send it again once the operator has freed space"
        )
    else:
        message = "the storage cannot take a file this large; nothing was kept"
    return error_response(ErrorCode.STORAGE_FULL, message)


async def _on_storage_error(request: Request, exc: Exception) -> JSONResponse:
    # A bucket outage is the operator's to fix, not a fault of ours: one log line per outage
    # (conveyor.objects.outage) and 503, never a traceback per request.
    full = full_storage(exc)
    if full is not None:
        # A full disk is an outage, logged once; a file too large for the folder is not one.
        if not STORAGE.failed(exc, "API"):
            log.warning("%s %s: %s", request.method, request.url.path, full)
        return storage_full_response(full)
    if STORAGE.failed(exc, "API"):
        return storage_unavailable_response()
    return await _on_unexpected(request, exc)


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(ErrorCode.INTERNAL, "the server failed; the operator's log has details")


def install_error_handlers(app: FastAPI) -> None:
    """Route every refusal through the one JSON shape."""
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(NotFound, _on_not_found)
    app.add_exception_handler(Conflict, _on_conflict)
    app.add_exception_handler(RejectedInput, _on_rejected)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(DataError, _on_data_error)
    for outage_error in (OperationalError, InterfaceError, PoolTimeout, DBAPIError):
        app.add_exception_handler(outage_error, _on_database_error)
    # Handled here, not by the catch-all below: Starlette re-raises what reaches that one (a
    # second traceback in the server's log).
    for storage_error in (OSError, BotoCoreError, ClientError):
        app.add_exception_handler(storage_error, _on_storage_error)
    app.add_exception_handler(Exception, _on_unexpected)
