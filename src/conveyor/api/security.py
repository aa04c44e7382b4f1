"""Headers every response carries so that no browser reads our bytes as something else.

``X-Content-Type-Options: nosniff`` on every response, whatever produced it (a route, an error
handler, a middleware's refusal, a 404 for no route): a browser then trusts the
``Content-Type`` we send instead of guessing one from the content, so an upload that happens to
look like HTML or script is never run as such. Stored objects add their own
``Content-Disposition`` and ``Content-Security-Policy`` (:mod:`conveyor.api.objects`).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SecurityHeadersMiddleware"]


class SecurityHeadersMiddleware:
    """Add ``X-Content-Type-Options: nosniff`` to every HTTP response (pure ASGI)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Content-Type-Options"] = "nosniff"
            await send(message)

        await self.app(scope, receive, send_with_headers)
