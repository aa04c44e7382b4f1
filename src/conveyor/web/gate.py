"""The door in front of the web app's forms, and a bound on every request's headers.

FastAPI reads a route's form body before it resolves the route's dependencies, so a form
route whose session check is a dependency would read a stranger's body first. This pure ASGI
middleware stands in front instead:

* **Headers**: a request with more than :data:`MAX_HEADERS` header lines or more than
  :data:`MAX_HEADER_BYTES` bytes of them is refused with 431 before anything else runs (the
  server bounds what it buffers too: :func:`conveyor.api.server.make_server`).
* **Forms**: a ``POST`` to a page (not ``/api``, not the two streaming uploads) is refused with
  401 unless its session cookie signs someone in, before a byte of its body is read (the
  sign-in form, which has no session yet, is the one exception). The signed-in user is kept
  on the request, so the route does not look it up again.
* **Read timeout**: such a body must arrive whole within :data:`FORM_READ_TIMEOUT` seconds of
  its headers (408 ``form_timeout`` otherwise, the connection closed), so a client trickling
  a form holds no thread or memory for long. Its size is bounded by the 1 MiB body limit
  (:mod:`conveyor.api.limits`).
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.api.errors import error_response
from conveyor.api.limits import is_upload
from conveyor.error_codes import ErrorCode
from conveyor.sizes import human_size
from conveyor.web.auth import current_viewer

__all__ = ["FORM_READ_TIMEOUT", "MAX_HEADERS", "MAX_HEADER_BYTES", "WebGate"]

MAX_HEADERS = 100
MAX_HEADER_BYTES = 16 * 1024
FORM_READ_TIMEOUT = 10.0
_OPEN_FORMS = frozenset({"/sign-in"})
_CLOSE = {"Connection": "close"}


def _is_form(scope: Scope, path: str) -> bool:
    return (
        scope["method"] == "POST"
        # The API's own routes (``/api``, and OpenAI's ``/v1`` that clients reach with a bearer
        # token) check their token themselves; only the pages' forms need a session.
        and not path.startswith(("/api/", "/v1/"))
        and not is_upload(scope["method"], path)
    )


class WebGate:
    """Bound headers; check the session of a page's form before its body, then time it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        size = sum(len(name) + len(value) for name, value in headers)
        if len(headers) > MAX_HEADERS or size > MAX_HEADER_BYTES:
            response = error_response(
                ErrorCode.HEADERS_TOO_LARGE,
                f"the request's headers are larger than {human_size(MAX_HEADER_BYTES)} or more "
                f"than {MAX_HEADERS} lines",
                headers=_CLOSE,
            )
            await response(scope, receive, send)
            return
        path = scope["path"]
        if not _is_form(scope, path):
            await self.app(scope, receive, send)
            return
        if path not in _OPEN_FORMS:
            request = Request(scope)
            state = scope["app"].state.conveyor
            viewer = await anyio.to_thread.run_sync(current_viewer, request, state)
            if viewer is None:
                response = error_response(ErrorCode.UNAUTHORIZED, "sign in first", headers=_CLOSE)
                await response(scope, receive, send)
                return
        deadline = time.monotonic() + FORM_READ_TIMEOUT
        complete = False

        async def timed() -> Message:
            nonlocal complete
            if complete:
                return await receive()
            left = deadline - time.monotonic()
            with anyio.move_on_after(max(0.0, left)):
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    complete = True
                return message
            # Raised into whoever reads the body (FastAPI re-raises HTTPException as is).
            raise HTTPException(
                408,
                f"the form did not arrive within {FORM_READ_TIMEOUT:g} s; send it again",
                headers=_CLOSE,
            )

        await self.app(scope, timed, send)
