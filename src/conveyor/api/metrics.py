"""HTTP metrics for Prometheus, labelled by route template (never by id or owner)."""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HTTP_REQUESTS", "HTTP_SECONDS", "SSE_STREAMS", "MetricsMiddleware"]

HTTP_REQUESTS = Counter(
    "conveyor_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
)
HTTP_SECONDS = Histogram(
    "conveyor_http_request_seconds",
    "Time to the end of the response, by method and route template (streams excluded).",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120),
)
SSE_STREAMS = Gauge("conveyor_sse_streams", "Album event streams open now.")

_STREAM_ROUTE = "/api/albums/{album_id}/events"


class MetricsMiddleware:
    """Counts every HTTP response (pure ASGI, so streams are not buffered)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        streaming = False

        async def send_wrapper(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = int(message["status"])
                route = scope.get("route")
                if status == 200 and getattr(route, "path", None) == _STREAM_ROUTE:
                    streaming = True
                    SSE_STREAMS.inc()
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            HTTP_REQUESTS.labels(method, route, str(status)).inc()
            if streaming:
                SSE_STREAMS.dec()
            else:
                HTTP_SECONDS.labels(method, route).observe(time.perf_counter() - started)
