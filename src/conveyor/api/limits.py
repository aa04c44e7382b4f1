"""A bound on the request bodies of every route but the two streaming uploads.

JSON bodies (``PATCH /api/records/{id}``, ``POST /api/albums``) are small; FastAPI reads them
whole before validating, so without a bound a client could make the server hold any amount.
Bodies over :data:`MAX_BODY_BYTES` are refused with 413 ``too_large`` in the one error shape:
at once from ``Content-Length``, and while reading a body sent without one (chunked). The
upload routes (``POST /api/records``, ``POST /api/albums/{id}/items`` and the web app's
``POST /records/upload``, ``POST /albums/{id}/upload``) stream their bodies to storage under
``[api] max_upload_bytes`` (:mod:`conveyor.api.uploads`) and pass untouched.
"""

from __future__ import annotations

import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.api.errors import error_response
from conveyor.api.headers import header_int
from conveyor.error_codes import ErrorCode
from conveyor.sizes import human_size

__all__ = ["MAX_BODY_BYTES", "BodyLimitMiddleware", "is_upload"]

MAX_BODY_BYTES = 1024 * 1024
# The rest of the body is not wanted: closing the connection stops the client sending it
# (otherwise the server would read it to the end, discarding it, to keep the connection).
_CLOSE = {"Connection": "close"}
_RESUMABLE = re.compile(r"^/uploads/[0-9a-f]{32}$")
_UPLOAD_PATHS = re.compile(
    r"^/(api/records|api/albums/[^/]+/items|records/upload|albums/[^/]+/upload)/?$"
)


def is_upload(method: str, path: str) -> bool:
    """True for the streaming upload routes, which bound their own bodies (and the web app's
    resumable uploads' ``PATCH /uploads/ID``)."""
    if method == "PATCH":
        return _RESUMABLE.match(path) is not None
    return method == "POST" and _UPLOAD_PATHS.match(path) is not None


def _too_large(limit: int) -> str:
    return f"the request body is larger than {human_size(limit)} (only uploads may be larger)"


class BodyLimitMiddleware:
    """Refuse request bodies over ``limit`` bytes outside the upload routes (pure ASGI)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        if is_upload(scope["method"], path):
            await self.app(scope, receive, send)
            return
        limit = self.limit
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = header_int(value.strip())
                if declared is not None and declared > limit:
                    response = error_response(
                        ErrorCode.TOO_LARGE, _too_large(limit), headers=_CLOSE
                    )
                    await response(scope, receive, send)
                    return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # Raised into whoever reads the body (FastAPI re-raises HTTPException as
                    # is); the error handlers answer it in the one shape.
                    raise HTTPException(413, _too_large(limit), headers=_CLOSE)
            return message

        await self.app(scope, bounded, send)
