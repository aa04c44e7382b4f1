"""Serving stored objects over HTTP: Content-Type from the journal, ETag, 304, byte ranges.

A browser seeking in a ``playback`` video sends ``Range: bytes=N-``; we answer 206 with that
slice. One range per request (a multi-range request is answered with the whole object, which
RFC 9110 allows); a syntactically invalid Range is ignored the same way; a range that starts
past the end answers 416 with ``Content-Range: bytes */<size>``. ``If-Range`` that does not
match the ETag asks for the whole object. ``If-None-Match`` with the ETag answers 304.

The ETag is the object's SHA-256 from the journal (strong: the same bytes, the same tag), or
size and modification time when the journal has no digest.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
from sqlalchemy import RowMapping
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from conveyor.api.errors import error_response
from conveyor.api.headers import header_int
from conveyor.errors import NotFound

__all__ = ["is_inline", "object_response", "parse_range"]

_CHUNK = 64 * 1024
# Objects are private to their owner; caches may keep them but must ask before reuse (ETag).
_CACHE_CONTROL = "private, no-cache"


class _WholeFile(FileResponse):
    """A FileResponse that never answers a range itself (ranges are decided before it)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k, v) for k, v in scope.get("headers", []) if k not in (b"range", b"if-range")]
        await super().__call__({**scope, "headers": headers}, receive, send)


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


async def _slice(path: Path, start: int, end: int) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as handle:
        await handle.seek(start)
        remaining = end - start
        while remaining > 0:
            chunk = await handle.read(min(_CHUNK, remaining))
            if not chunk:
                return
            remaining -= len(chunk)
            yield chunk


def _etag(row: RowMapping, stat: os.stat_result) -> str:
    if row["sha256"]:
        return f'"{row["sha256"]}"'
    return f'"{stat.st_size:x}-{stat.st_mtime_ns:x}"'


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
    request: Request, path: Path, row: RowMapping, *, filename: str | None = None
) -> Response:
    """The response for the object at ``path`` described by its journal ``row``.

    Args:
        request: for ``Range``, ``If-Range``, ``If-None-Match``.
        path: the object's file in the store.
        row: its ``files`` row (``mime_type``, ``sha256``).
        filename: a name for ``Content-Disposition``: ``inline`` for photos, audio and video,
            ``attachment`` for anything else.

    Raises:
        NotFound: the journal names an object the store no longer has.
    """
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise NotFound("the file is no longer stored") from None
    etag = _etag(row, stat)
    mime = str(row["mime_type"])
    headers: dict[str, Any] = {
        "ETag": etag,
        "Accept-Ranges": "bytes",
        "Cache-Control": _CACHE_CONTROL,
        "Content-Disposition": _disposition(mime, filename),
        "Content-Security-Policy": _OBJECT_CSP,
    }
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and _matches(if_none_match, etag):
        return Response(status_code=304, headers={k: headers[k] for k in ("ETag", "Cache-Control")})
    wanted = request.headers.get("range")
    if_range = request.headers.get("if-range")
    if wanted is not None and (if_range is None or if_range.strip() == etag):
        decided = parse_range(wanted, stat.st_size)
        if decided is False:
            return error_response(
                416,
                "range_not_satisfiable",
                f"the range {wanted!r} is outside the file ({stat.st_size} bytes)",
                headers={"Content-Range": f"bytes */{stat.st_size}", "Accept-Ranges": "bytes"},
            )
        if isinstance(decided, tuple):
            start, end = decided
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{stat.st_size}"
            headers["Content-Length"] = str(end - start)
            if request.method == "HEAD":
                return Response(status_code=206, media_type=mime, headers=headers)
            return StreamingResponse(
                _slice(path, start, end), status_code=206, media_type=mime, headers=headers
            )
    return _WholeFile(path, media_type=mime, headers=headers, stat_result=stat)
