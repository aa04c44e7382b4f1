"""The request body of an upload as a blocking iterator of chunks, for the intake's thread.

Each chunk is asked of the event loop when the intake wants it, so the body is read as fast as
the store takes it (back-pressure reaches the client through TCP), and nothing is held beyond
one network chunk. While it waits it watches three clocks: the server's stop (an upload still
arriving gets ``ApiState.upload_stop_grace`` seconds, then 503 ``shutting_down``), silence
(``[api] upload_idle_timeout`` seconds without a byte: 408 ``upload_timeout``) and a trickle
(below ``[api] upload_min_rate`` bytes per second over each such span: 408 too). The intake
removes what it stored when any of them ends the upload.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import anyio
import anyio.from_thread
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message

from conveyor.api.errors import ApiError
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput
from conveyor.sizes import human_size

__all__ = ["BodyChunks"]

# How often a waiting upload looks at the server's stop flag (seconds).
_TICK = 0.25


class BodyChunks:
    """The request body as a blocking iterator of byte chunks, for a worker thread.

    Each step asks the event loop for the next chunk (``anyio.from_thread``), so the body is
    read as fast as the intake writes it: back-pressure reaches the client through TCP.

    When the server begins to stop (``closing``), an upload still arriving gets ``stop_grace``
    seconds more; then it is refused with 503 ``shutting_down`` (the intake removes what it
    stored), before uvicorn's own graceful-shutdown timeout would cancel it without a word.
    """

    def __init__(
        self,
        request: Request,
        limit: int,
        *,
        closing: threading.Event | None = None,
        stop_grace: float = 0.0,
        idle_timeout: float = float("inf"),
        min_rate: float = 0.0,
        first: Message | None = None,
    ) -> None:
        self._receive = request.receive
        self._limit = limit
        self._seen = 0
        self._done = False
        self._closing = closing
        self._stop_grace = stop_grace
        self._stop_at: float | None = None
        self._idle_timeout = idle_timeout
        self._min_rate = min_rate
        # The progress window: bytes arrived since it began.
        self._window_start = time.monotonic()
        self._window_bytes = 0
        self._first = first

    def _check_progress(self) -> None:
        now = time.monotonic()
        if now - self._window_start < self._idle_timeout:
            return
        wanted = self._min_rate * (now - self._window_start)
        if self._window_bytes < wanted:
            raise ApiError(
                ErrorCode.UPLOAD_TIMEOUT,
                f"the upload sent {human_size(self._window_bytes)} in "
                f"{now - self._window_start:.0f} s, below the minimum of "
                f"{human_size(round(self._min_rate))}/s; nothing was kept, send it again",
                headers={"Connection": "close"},
            )
        self._window_start, self._window_bytes = now, 0

    async def _message(self) -> Message:
        # Waits a tick at a time (uvicorn's receive is safe to cancel: a message is taken only
        # once it is there), so a stop is noticed while the client is slow or silent.
        if self._first is not None:
            first, self._first = self._first, None
            return first
        idle_since = time.monotonic()
        while True:
            wait = _TICK
            self._check_progress()
            if time.monotonic() - idle_since >= self._idle_timeout:
                # A connection that holds an upload slot and sends nothing would keep it
                # forever; the intake removes what was stored so far.
                raise ApiError(
                    ErrorCode.UPLOAD_TIMEOUT,
                    f"the upload sent nothing for {self._idle_timeout:g} s; nothing was kept, "
                    "send it again",
                    headers={"Connection": "close"},
                )
            if self._closing is not None and self._closing.is_set():
                if self._stop_at is None:
                    self._stop_at = time.monotonic() + self._stop_grace
                left = self._stop_at - time.monotonic()
                if left <= 0:
                    raise ApiError(
                        ErrorCode.SHUTTING_DOWN,
                        "the server is stopping and the upload did not finish in time; "
                        "nothing was kept, send it again",
                    )
                wait = min(wait, left)
            with anyio.move_on_after(wait):
                return await self._receive()

    async def _next(self) -> bytes | None:
        while not self._done:
            message = await self._message()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            if message["type"] == "http.request":
                if not message.get("more_body", False):
                    self._done = True
                body: bytes = message.get("body", b"")
                self._window_bytes += len(body)
                if body:
                    return body
        return None

    def __iter__(self) -> Iterator[bytes]:
        while True:
            chunk = anyio.from_thread.run(self._next)
            if chunk is None:
                return
            self._seen += len(chunk)
            # The intake bounds the file; this bounds what surrounds it (multipart parts).
            if self._seen > self._limit:
                raise RejectedInput(
                    ErrorCode.TOO_LARGE,
                    f"the request body is larger than {human_size(self._limit)}",
                )
            if chunk:
                yield chunk
