"""Serving stored objects over HTTP: Content-Type from the journal, ETag, 304, byte ranges.

A browser seeking in a ``playback`` video sends ``Range: bytes=N-``; we answer 206 with that
slice. One range per request (a multi-range request is answered with the whole object, which
RFC 9110 allows); a syntactically invalid Range is ignored the same way; a range that starts
past the end answers 416 with ``Content-Range: bytes */<size>``. ``If-Range`` that does not
match the ETag asks for the whole object. ``If-None-Match`` with the ETag answers 304.

The ETag is the object's SHA-256 from the journal (strong: the same bytes, the same tag), or
size and modification time when the journal has no digest.

The bytes are streamed from the object store (a folder or a bucket alike). With ``[storage]
presign = true`` and a store that can sign URLs, the answer is instead a ``307`` redirect to a
presigned URL of the object, valid ``[storage] presign_expires`` seconds, which makes the bucket
answer with the same Content-Type and Content-Disposition (ranges and ETags are then the
bucket's own).

:func:`owned_file_response` serves an object by key to its owner only: the API's
``/api/files/{key}`` and the pages' file routes both answer through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from sqlalchemy import RowMapping
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from conveyor.api.errors import error_response
from conveyor.api.headers import header_int
from conveyor.api.queries import album_file, owned_file
from conveyor.api.state import ApiState
from conveyor.error_codes import ErrorCode
from conveyor.errors import NotFound
from conveyor.objects import ListedObject, ObjectStore

__all__ = [
    "album_file_response",
    "is_inline",
    "object_response",
    "owned_file_response",
    "parse_range",
]

_CHUNK = 256 * 1024
# Objects are private to their owner; caches may keep them but must ask before reuse (ETag).
_CACHE_CONTROL = "private, no-cache"


def parse_range(header: str, size: int) -> tuple[int, int] | bool | None:
    """Decide a ``Range`` header against an object of ``size`` bytes.

    Returns:
        ``(start, end)`` (end exclusive) for one satisfiable range; None when the header is to
        be ignored (invalid, other unit, several ranges); False when it cannot be satisfied.
    """
    unit, sep, spec = header.partition("=")
    if not sep or unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    first, last = first.strip(), last.strip()
    # ASCII digits only (RFC 9110 1*DIGIT): "²" or "١" make the header invalid, so it is
    # ignored like any other malformed Range.
    start, final = header_int(first), header_int(last)
    if not dash or (first and start is None) or (last and final is None):
        return None
    if start is None:
        if final is None:
            return None
        if final == 0 or size == 0:
            return False
        return max(0, size - final), size
    if final is not None and final < start:
        return None
    if start >= size:
        return False
    end = size if final is None else min(final + 1, size)
    return start, end


def _slice(store: ObjectStore, key: str, start: int, end: int) -> Iterator[bytes]:
    # A plain iterator: Starlette reads it in its thread pool, one chunk at a time.
    with store.open(key, start, end) as body:
        while chunk := body.read(_CHUNK):
            yield chunk


def _etag(row: RowMapping, found: ListedObject) -> str:
    if row["sha256"]:
        return f'"{row["sha256"]}"'
    return f'"{found.size:x}-{round(found.modified * 1e9):x}"'


# Types a browser shows as media and never runs. Everything else (a raw provider response in
# JSON, text, an octet-stream) is served as an attachment: downloaded, never rendered in our
# origin. SVG is absent on purpose: it is an image that can carry script.
_INLINE_TYPES = re.compile(
    r"(image/(jpeg|png|gif|webp|avif|heic|heif|tiff|bmp)|audio/[a-z0-9.+-]+|video/[a-z0-9.+-]+)"
)
# A stored object is content, not a page: even if a browser rendered one, it could run nothing.
_OBJECT_CSP = "default-src 'none'; media-src 'self'; img-src 'self'; sandbox"


def is_inline(mime: str) -> bool:
    """True for the media types served ``inline``; every other object is an ``attachment``."""
    return _INLINE_TYPES.fullmatch(mime.split(";", 1)[0].strip().lower()) is not None


def _disposition(mime: str, filename: str | None) -> str:
    kind = "inline" if is_inline(mime) else "attachment"
    if not filename:
        return kind
    return f"{kind}; filename*=utf-8''{quote(filename)}"


def _matches(header: str, etag: str) -> bool:
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


def object_response(
    request: Request,
    store: ObjectStore,
    row: RowMapping,
    *,
    filename: str | None = None,
    presign: float | None = None,
) -> Response:
    """The response for the stored object described by its journal ``row``.

    Args:
        request: for ``Range``, ``If-Range``, ``If-None-Match``.
        store: the object store holding ``row["key"]``.
        row: its ``files`` row (``key``, ``mime_type``, ``sha256``).
        filename: a name for ``Content-Disposition``: ``inline`` for photos, audio and video,
            ``attachment`` for anything else.
        presign: seconds a presigned URL is valid when the answer may redirect to one
            (``[storage] presign``); None streams the bytes.

    Raises:
        NotFound: the journal names an object the store no longer has.
    """
    key = str(row["key"])
    try:
        found = store.stat(key)
    except ValueError:  # a key no store could hold
        found = None
    if found is None:
        raise NotFound("the file is no longer stored")
    size = found.size
    etag = _etag(row, found)
    mime = str(row["mime_type"])
    disposition = _disposition(mime, filename)
    headers: dict[str, Any] = {
        "ETag": etag,
        "Accept-Ranges": "bytes",
        "Cache-Control": _CACHE_CONTROL,
        "Content-Disposition": disposition,
        "Content-Security-Policy": _OBJECT_CSP,
    }
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and _matches(if_none_match, etag):
        return Response(status_code=304, headers={k: headers[k] for k in ("ETag", "Cache-Control")})
    if presign is not None:
        url = store.presign(key, expires=presign, mime_type=mime, disposition=disposition)
        if url is not None:
            # The URL expires: the redirect itself must not be reused from a cache.
            return RedirectResponse(url, status_code=307, headers={"Cache-Control": "no-store"})
    wanted = request.headers.get("range")
    if_range = request.headers.get("if-range")
    if wanted is not None and (if_range is None or if_range.strip() == etag):
        decided = parse_range(wanted, size)
        if decided is False:
            return error_response(
                ErrorCode.RANGE_NOT_SATISFIABLE,
                f"the range {wanted!r} is outside the file ({size} bytes)",
                headers={"Content-Range": f"bytes */{size}", "Accept-Ranges": "bytes"},
            )
        if isinstance(decided, tuple):
            start, end = decided
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
            headers["Content-Length"] = str(end - start)
            if request.method == "HEAD":
                return Response(status_code=206, media_type=mime, headers=headers)
            return StreamingResponse(
                _slice(store, key, start, end), status_code=206, media_type=mime, headers=headers
            )
    headers["Content-Length"] = str(size)
    if request.method == "HEAD":
        return Response(status_code=200, media_type=mime, headers=headers)
    return StreamingResponse(
        _slice(store, key, 0, size), status_code=200, media_type=mime, headers=headers
    )


def owned_file_response(request: Request, state: ApiState, key: str, owner: str) -> Response:
    """The object ``key`` if it belongs to a record or item of ``owner``, or to an item of an
    album shared with them (else NotFound)."""
    with state.runtime.engine.connect() as conn:
        row = owned_file(conn, key, owner)
    if row is None:
        raise NotFound("no such file")
    runtime = state.runtime
    return object_response(request, runtime.store, row, presign=runtime.presign_expires)


def album_file_response(request: Request, state: ApiState, key: str, album_id: int) -> Response:
    """The object ``key`` if it belongs to an item of the album (a link's holder; else
    NotFound)."""
    with state.runtime.engine.connect() as conn:
        row = album_file(conn, key, album_id)
    if row is None:
        raise NotFound("no such file")
    runtime = state.runtime
    return object_response(request, runtime.store, row, presign=runtime.presign_expires)
