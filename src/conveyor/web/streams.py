"""Live streams of the pages: an owner's recordings (journal rows, D14) and an album (M5).

Each connection reads the durable table itself after the last id it delivered, so a
reconnecting page (``Last-Event-ID`` or ``?last_event_id=``) gets every change it missed exactly
once, and a slow page slows only its own stream. A write in this process wakes the streams at
once (the notifier); writes of other processes are seen at the next poll. The stream ends when
the server stops or the session is signed out (checked at most every 5 s). One session may hold
``[api] streams_per_token`` streams open at once, as an API token may (429 beyond).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from functools import partial

import anyio
import anyio.to_thread
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine
from starlette.types import Receive, Scope, Send

from conveyor.accounts import session_active
from conveyor.api.errors import ApiError
from conveyor.api.headers import last_event_id
from conveyor.api.live import READS
from conveyor.api.sse import format_event
from conveyor.api.state import ApiState
from conveyor.audio.stages import AUDIO
from conveyor.clock import iso_utc
from conveyor.db.ids import IdKind
from conveyor.db.notify import Notifier
from conveyor.error_codes import ErrorCode
from conveyor.media.broadcast import AlbumBroadcast
from conveyor.web import queries
from conveyor.web.views import link_shown
from conveyor.web.words import event_words

__all__ = [
    "album_reader",
    "journal_reader",
    "page_stream",
    "page_stream_response",
    "start_point",
]

Reader = Callable[[int], list[tuple[int, str]]]
"""``read(after_id)`` → ``(id, SSE block)`` of the next events, oldest first."""

_TICK = 0.1
_RETRY_MS = 2000
_BATCH = 100
_AUTH_CHECK = 5.0


def journal_reader(engine: Engine, owner: str, record_id: int | None) -> Reader:
    """Changes of ``owner``'s records (or of one record) as SSE blocks of event ``record``."""

    def read(after: int) -> list[tuple[int, str]]:
        with engine.connect() as conn:
            rows = queries.audio_events_after(conn, owner, after, _BATCH, record_id)
        blocks = []
        for r in rows:
            data = {
                "id": r["id"],
                "record_id": r["record_id"],
                "stage": r["stage"],
                "outcome": r["outcome"],
                "outcome_text": r["outcome_text"],
                "words": event_words(AUDIO, str(r["stage"]), str(r["outcome"])),
                "created_at": iso_utc(r["created_at"]),
            }
            block = f"id: {r['id']}\nevent: record\ndata: {json.dumps(data)}\n\n"
            blocks.append((int(r["id"]), block))
        return blocks

    return read


def album_reader(broadcast: AlbumBroadcast, album_id: int, *, link: bool = False) -> Reader:
    """The album's outbox events as the API's stream formats them (``link``: for a link's
    holder, each payload as :func:`~conveyor.web.views.link_shown` leaves it, as its pages are)."""

    def read(after: int) -> list[tuple[int, str]]:
        events = broadcast.events_after(album_id, after, _BATCH)
        if link:
            events = [replace(e, payload=link_shown(e.payload)) for e in events]
        return [(e.id, format_event(e)) for e in events]

    return read


async def page_stream(
    read: Reader,
    notifier: Notifier,
    last_id: int,
    *,
    heartbeat: float,
    poll_interval: float,
    closing: threading.Event,
    still_allowed: Callable[[], bool],
) -> AsyncIterator[str]:
    """SSE text of ``read``'s events after ``last_id`` until ``closing`` is set or
    ``still_allowed`` turns False (the session was signed out).

    Args:
        heartbeat: seconds of silence before a ``: keep-alive`` comment.
        poll_interval: seconds between reads without a wake-up (other processes' writes).
    """
    yield f"retry: {_RETRY_MS}\n\n"
    last_write = last_check = time.monotonic()
    check_every = min(heartbeat, _AUTH_CHECK)
    while not closing.is_set():
        if time.monotonic() - last_check >= check_every:
            if not await anyio.to_thread.run_sync(still_allowed, limiter=READS):
                yield ": signed out\n\n"
                return
            last_check = time.monotonic()
        generation = notifier.generation
        blocks = await anyio.to_thread.run_sync(read, last_id, limiter=READS)
        if blocks:
            for event_id, block in blocks:
                yield block
                last_id = event_id
            last_write = time.monotonic()
            continue
        next_read = time.monotonic() + poll_interval
        while (
            time.monotonic() < next_read
            and notifier.generation == generation
            and not closing.is_set()
            and time.monotonic() - last_check < check_every
        ):
            if time.monotonic() - last_write >= heartbeat:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
            await anyio.sleep(_TICK)


def start_point(
    header: str | None, query: int | None, latest: Callable[[], int], kind: IdKind
) -> int:
    """The event id a page's stream starts after.

    Args:
        header: the ``Last-Event-ID`` a reconnecting ``EventSource`` sends (ASCII digits).
        query: ``?last_event_id=`` of a page's first connection.
        latest: the newest id now, for a page that saw nothing yet (called only then).
        kind: the events' kind (:mod:`conveyor.db.ids`), which bounds the header's id.

    Raises:
        ApiError: 400 ``bad_last_event_id`` for a header that is not a number, rather than a
            silent restart from the newest event that would drop what the page missed.
        NotFound: a header no event of ``kind`` can have (past its column's range), 404.
    """
    if header is not None and header.strip():
        return last_event_id(header, kind)
    if query is not None:
        return query
    return latest()


class _SessionStream(StreamingResponse):
    """A stream that gives its session's place back however it ends."""

    def __init__(self, body: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(
            body,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def page_stream_response(
    state: ApiState,
    session_id: int,
    read: Reader,
    start: int,
    *,
    poll_interval: float,
    still_allowed: Callable[[], bool] | None = None,
) -> StreamingResponse:
    """``read``'s events after ``start`` as a text/event-stream response that ends when the
    server stops or the session ``session_id`` is signed out (called in the event loop).

    A link's page has no session: it passes its own ``session_id`` key (the link's id,
    negated, so it never meets a session's) and ``still_allowed`` (the link is neither revoked
    nor expired), checked instead of the session.

    Raises:
        ApiError: 429 ``too_many_streams`` when the session has ``[api] streams_per_token``
            streams open already.
    """
    runtime = state.runtime
    held = state.page_streams_by_session
    limit = runtime.settings.api.streams_per_token
    if held.get(session_id, 0) >= limit:
        raise ApiError(
            ErrorCode.TOO_MANY_STREAMS,
            f"this session has {held[session_id]} live streams open (the limit is {limit}); "
            "close a tab of this site",
            headers={"Retry-After": "5"},
        )
    held[session_id] = held.get(session_id, 0) + 1

    def release() -> None:
        left = held.get(session_id, 0) - 1
        if left > 0:
            held[session_id] = left
        else:
            held.pop(session_id, None)

    stream = page_stream(
        read,
        runtime.notifier,
        start,
        heartbeat=runtime.settings.api.sse_heartbeat,
        poll_interval=poll_interval,
        closing=state.closing,
        still_allowed=still_allowed or partial(session_active, runtime.engine, session_id),
    )
    return _SessionStream(stream, release)
