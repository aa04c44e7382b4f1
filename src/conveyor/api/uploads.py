"""Uploads streamed from the request into the object store, never held in memory.

A route hands the request to :func:`receive_upload` together with an ``accept`` function (the
domain's intake). The intake runs in a worker thread and pulls the body chunk by chunk from the
event loop (:class:`BodyChunks`); a ``multipart/form-data`` body is parsed as it streams
(:mod:`conveyor.api.multipart`, on python-multipart's push parser) and only the file part's
bytes reach the store. At most one network chunk (≈64 KiB) is buffered at a time, whatever the
upload's size.

Two body shapes:

* ``multipart/form-data`` with one part named ``file`` (a browser form, ``curl -F file=@x``),
  text fields the route names before it (``curl -F`` keeps the order given); what else is
  refused with 400, nothing kept, is listed in :mod:`conveyor.api.multipart`;
* anything else: the body is the file itself (``curl --data-binary @x``); the content type is
  never trusted, the content is sniffed by the intake.

Stopping: on SIGTERM an upload still arriving gets ``ApiState.upload_stop_grace`` seconds
(8 s, inside uvicorn's 10 s graceful shutdown), then a JSON 503 ``shutting_down``; nothing kept.

Fairness: an owner has at most ``[api] uploads_per_owner`` uploads arriving at once (429 with
``Retry-After`` beyond); the process has 32 upload slots, and a request waiting for one whose
client leaves is never processed; an upload that sends nothing for ``[api]
upload_idle_timeout`` seconds gets 408 ``upload_timeout`` and what it sent is removed, and so
does one that trickles: over every ``upload_idle_timeout`` seconds it must send at least
``[api] upload_min_rate`` bytes per second on average (1 KiB/s by default: a slot held by a
byte every 20 s would otherwise never count as idle).

Size: ``[api] max_upload_bytes`` is checked from ``Content-Length`` before anything is read
(413 at once) and again while streaming (413, the partial object removed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import anyio
import anyio.from_thread
import anyio.to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message

from conveyor.api.body import BodyChunks
from conveyor.api.errors import ApiError
from conveyor.api.headers import header_int
from conveyor.api.multipart import MultipartFile, Upload, boundary_of
from conveyor.api.schemas import ErrorBody
from conveyor.api.state import ApiState, state_of
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput
from conveyor.names import kept_name
from conveyor.objects.outage import STORAGE
from conveyor.sizes import human_size

__all__ = [
    "KEEP_DUPLICATE",
    "BodyChunks",
    "Upload",
    "check_length",
    "documented",
    "keep_duplicate_chosen",
    "receive_upload",
    "sent_name",
    "upload_responses",
]

T = TypeVar("T")


def sent_name(request: Request) -> str | None:
    """The raw body's ``?name=`` as it is kept (:func:`conveyor.names.kept_name`), read from
    the query's bytes: a percent-escaped byte that is not UTF-8 is kept ``\\xNN``, as the
    CLI keeps it, where the parsed parameter would hold U+FFFD; None without a name."""
    query = request.scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True, encoding="latin-1"):
        if key == "name":
            return kept_name(value.encode("latin-1"))
    return None


#: The text part (or query parameter) that keeps a second copy of content already held.
KEEP_DUPLICATE = "keep_duplicate"
_YES = frozenset({"true", "1", "yes", "on"})
_NO = frozenset({"false", "0", "no", "off", ""})


def keep_duplicate_chosen(upload: Upload, given: bool = False) -> bool:
    """Whether the upload asks to keep a second copy: the ``keep_duplicate`` query parameter
    (``given``) or its multipart text field, as every upload route takes its choices.

    Raises:
        RejectedInput: ``invalid_request``: the field is neither true nor false (``true``,
            ``1``, ``yes``, ``on`` / ``false``, ``0``, ``no``, ``off``, any case).
    """
    value = upload.fields.get(KEEP_DUPLICATE)
    if value is None:
        return given
    word = value.strip().lower()
    if word not in _YES | _NO:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, "keep_duplicate is true or false")
    return given or word in _YES


def documented(description: str, *codes: ErrorCode, **extra: Any) -> dict[int | str, Any]:
    """One OpenAPI error response, ``{status: {"model": ErrorBody, "description": ...}}``: its
    status is the codes' own (:class:`~conveyor.error_codes.ErrorCode`, the declaration the
    error table of docs/http.md is held to), and the description ends with the code words.

    Raises:
        ValueError: no code, or codes answered with different statuses (or never over HTTP).
    """
    statuses = {code.status for code in codes}
    if len(statuses) != 1 or None in statuses:
        raise ValueError(f"one HTTP status for {codes!r}, not {statuses!r}")
    words = ", ".join(f"`{code.value}`" for code in codes)
    status = statuses.pop()
    assert status is not None
    return {status: {"model": ErrorBody, "description": f"{description} ({words})", **extra}}


def upload_responses(not_media: str, unprocessable: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI error responses every upload route shares, with its own 415/422 wording;
    the shared ones take their status from their codes' declaration (:func:`documented`)."""
    retry_after = {"Retry-After": {"schema": {"type": "integer"}}}
    return {
        # 400, 415 and 422 are each route's own words (the OpenAI route answers its refused
        # fields 400, as OpenAI does), so they are not one list of codes.
        400: {
            "model": ErrorBody,
            "description": "Malformed multipart body, an unknown form field, or cut off.",
        },
        **documented(
            "Sent nothing for `[api] upload_idle_timeout` s; nothing kept.",
            ErrorCode.UPLOAD_TIMEOUT,
        ),
        **documented("Larger than `[api] max_upload_bytes`.", ErrorCode.TOO_LARGE),
        415: {"model": ErrorBody, "description": not_media},
        422: {"model": ErrorBody, "description": unprocessable},
        **documented(
            "Over `[api] uploads_per_owner` uploads arriving at once.",
            ErrorCode.TOO_MANY_UPLOADS,
            headers=retry_after,
        ),
        **documented(
            "The server is stopping, or the database or the storage does not answer; nothing "
            "kept, send it again (after `Retry-After`, for an outage).",
            ErrorCode.SHUTTING_DOWN,
            ErrorCode.DATABASE_UNAVAILABLE,
            ErrorCode.STORAGE_UNAVAILABLE,
            headers=retry_after,
        ),
        **documented(
            "The storage has no room: its disk, quota or bucket is full, or it cannot take a "
            "file this large; nothing kept, no `Retry-After` (space comes back when the "
            "operator frees it).",
            ErrorCode.STORAGE_FULL,
        ),
    }


# Room for multipart boundaries and part headers beyond the file itself.
_MULTIPART_OVERHEAD = 256 * 1024


def check_length(request: Request, max_bytes: int) -> None:
    """Refuse at once (413) when ``Content-Length`` already says the upload is too large.

    Raises:
        RejectedInput: ``too_large``.
        ApiError: 400 for a Content-Length that is not a number.
    """
    declared = request.headers.get("content-length")
    if declared is None:
        return
    length = header_int(declared.strip())
    if length is None:
        raise ApiError(ErrorCode.BAD_REQUEST, "Content-Length is not a number")
    allowed = max_bytes + (_MULTIPART_OVERHEAD if _is_multipart(request) else 0)
    if length > allowed:
        raise RejectedInput(
            ErrorCode.TOO_LARGE, f"the upload is larger than the limit of {human_size(max_bytes)}"
        )


def _is_multipart(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind == "multipart/form-data"


def _receive(
    request: Request,
    body: BodyChunks,
    accept: Callable[[Iterator[bytes], Upload], T],
    fields: frozenset[str],
) -> T:
    chunks = iter(body)
    if _is_multipart(request):
        parsed = MultipartFile(chunks, boundary_of(request.headers.get("content-type", "")), fields)
        upload = parsed.read_fields()
        return accept(iter(parsed), upload)
    return accept(chunks, Upload())


async def _wait_for_slot(request: Request, state: ApiState) -> tuple[object, Message | None]:
    """Take one of the process's upload slots, watching the client while it waits.

    Returns:
        The slot's borrower (to release it) and the first body message if it came while
        waiting (handed on to :class:`BodyChunks`).

    Raises:
        ClientDisconnect: the client left before a slot was free; it never gets one.
    """
    slots = state.upload_slots
    borrower = object()
    first: Message | None = None
    left = acquired = False

    async with anyio.create_task_group() as group:

        async def take() -> None:
            nonlocal acquired
            await slots.acquire_on_behalf_of(borrower)
            acquired = True
            group.cancel_scope.cancel()

        async def watch() -> None:
            # One message is read at most (and kept): a client that went away says so with
            # http.disconnect; one that is sending shows its first chunk.
            nonlocal first, left
            message = await request.receive()
            if message["type"] == "http.disconnect":
                left = True
                group.cancel_scope.cancel()
            else:
                first = message

        group.start_soon(take)
        group.start_soon(watch)
    if left:
        if acquired:
            slots.release_on_behalf_of(borrower)
        raise ClientDisconnect()
    return borrower, first


async def receive_upload(
    request: Request,
    accept: Callable[[Iterator[bytes], Upload], T],
    *,
    max_bytes: int,
    owner: str,
    fields: frozenset[str] = frozenset(),
) -> T:
    """Stream the request's upload into ``accept`` (run in a worker thread).

    Fair to everyone: each owner may have ``[api] uploads_per_owner`` uploads arriving at once
    (more get 429), an upload waits for one of the process's slots (a client that leaves while
    waiting is never processed), and one that sends nothing for ``[api] upload_idle_timeout``
    seconds is refused with 408 (the intake removes what it stored).

    Args:
        request: the upload request.
        accept: the intake: called with the file's byte chunks and what came with them.
        max_bytes: ``[api] max_upload_bytes``, checked here from Content-Length; ``accept``
            enforces it while streaming.
        owner: the account's name, for the per-owner cap.
        fields: the text fields a multipart body may carry before ``file``; any other is 400.

    Returns:
        What ``accept`` returns.

    Raises:
        RejectedInput: ``too_large`` from Content-Length (and whatever ``accept`` raises).
        ApiError: 400 for a malformed multipart body, an unknown field or a client that went
            away mid-upload; 408 for an idle upload; 429 over the owner's cap; 503 when the
            server stops and the upload does not finish within its grace.
    """
    check_length(request, max_bytes)
    state = state_of(request)
    settings = state.runtime.settings.api
    arriving = state.uploads_by_owner.get(owner, 0)
    if arriving >= settings.uploads_per_owner:
        raise ApiError(
            ErrorCode.TOO_MANY_UPLOADS,
            f"you have {arriving} uploads arriving already (the limit is "
            f"{settings.uploads_per_owner}); send this one when one of them has finished",
            headers={"Retry-After": "5"},
        )
    state.uploads_by_owner[owner] = arriving + 1
    try:
        try:
            borrower, first = await _wait_for_slot(request, state)
        except ClientDisconnect:
            raise ApiError(
                ErrorCode.CLIENT_DISCONNECTED, "the client left before sending"
            ) from None
        try:
            body = BodyChunks(
                request,
                max_bytes + _MULTIPART_OVERHEAD,
                closing=state.closing,
                stop_grace=state.upload_stop_grace,
                idle_timeout=settings.upload_idle_timeout,
                min_rate=settings.upload_min_rate,
                first=first,
            )
            accepted = await anyio.to_thread.run_sync(
                _receive, request, body, accept, fields, limiter=state.upload_threads
            )
            STORAGE.succeeded()  # the upload reached the store: part of ending an outage
            return accepted
        except ClientDisconnect:
            raise ApiError(ErrorCode.CLIENT_DISCONNECTED, "the upload was cut off") from None
        finally:
            state.upload_slots.release_on_behalf_of(borrower)
    finally:
        left = state.uploads_by_owner[owner] - 1
        if left:
            state.uploads_by_owner[owner] = left
        else:
            del state.uploads_by_owner[owner]
