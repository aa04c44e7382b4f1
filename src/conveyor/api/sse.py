"""Server-Sent Events of an album, read from the durable outbox ``album_events`` (M5).

Each connection reads the outbox itself, after the last id it delivered, so a slow client only
slows its own stream: nothing is queued in memory for it, and no worker ever waits on a
subscriber. While the client drains, its generator is simply suspended at ``yield`` (TCP
back-pressure); it holds no thread and no database connection in between reads.

Wire format, one block per event::

    id: 42
    event: item.ready
    data: {"album_id": 3, "item_id": 17, "kind": "item.ready", ...}

A reconnecting client sends ``Last-Event-ID`` (browsers do this by themselves) or
``?last_event_id=``; delivery continues right after that id, so nothing is missed and nothing
repeats. Without either, the stream starts at the newest event now (the album page's
``last_event_id`` closes the gap between reading the album and subscribing). An idle stream
gets a ``: keep-alive`` comment every ``[api] sse_heartbeat`` seconds.

The bearer token is checked again every heartbeat (at most every 5 s; one primary-key read):
once it is revoked the stream ends, and the browser's reconnect gets 401.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.to_thread

from conveyor.clock import iso_utc
from conveyor.db.notify import Notifier
from conveyor.media.broadcast import AlbumBroadcast, AlbumEvent

__all__ = ["album_stream", "format_event"]

# Outbox reads of all event streams share these threads, so a crowd of subscribers cannot take
# the threads the ordinary routes need.
SSE_READS = anyio.CapacityLimiter(8)
# How often an idle stream looks at the wake-up counter and the stop flag (seconds); the
# counter is an in-memory integer, so this costs nothing.
_TICK = 0.1
# Reconnect delay a browser should use (milliseconds).
_RETRY_MS = 2000
_BATCH = 100
# Longest time between two checks that the stream's token is still valid (seconds).
_AUTH_CHECK = 5.0


def format_event(event: AlbumEvent) -> str:
    """One SSE block for an outbox event."""
    data = {
        "album_id": event.album_id,
        "item_id": event.item_id,
        "kind": event.kind,
        "created_at": iso_utc(event.created_at),
        "payload": event.payload,
        "links": {"item": f"/api/items/{event.item_id}"},
    }
    return f"id: {event.id}\nevent: {event.kind}\ndata: {json.dumps(data, sort_keys=True)}\n\n"


async def album_stream(
    broadcast: AlbumBroadcast,
    notifier: Notifier,
    album_id: int,
    last_id: int,
    *,
    heartbeat: float,
    poll_interval: float,
    closing: threading.Event,
    still_allowed: Callable[[], bool] | None = None,
) -> AsyncIterator[str]:
    """The SSE text of one subscriber, from just after ``last_id``, until ``closing`` is set.

    Args:
        broadcast: the outbox reader.
        notifier: this process's wake-ups (a step that wrote an event bumps it).
        album_id: the album.
        last_id: the last event id the client has.
        heartbeat: seconds of silence before a keep-alive comment.
        poll_interval: seconds between outbox reads without a wake-up (events written by
            other processes).
        closing: the server is stopping; end the stream so it can.
        still_allowed: False once the subscriber's token is revoked (a blocking call, run in
            a worker thread every heartbeat, at most every 5 s); the stream then ends.
    """
    yield f"retry: {_RETRY_MS}\n\n"
    last_write = last_check = time.monotonic()
    check_every = min(heartbeat, _AUTH_CHECK) if still_allowed is not None else float("inf")
    while not closing.is_set():
        if still_allowed is not None and time.monotonic() - last_check >= check_every:
            allowed = await anyio.to_thread.run_sync(still_allowed, limiter=SSE_READS)
            if not allowed:
                yield ": the token was revoked\n\n"
                return
            last_check = time.monotonic()
        generation = notifier.generation
        events = await anyio.to_thread.run_sync(
            broadcast.events_after, album_id, last_id, _BATCH, limiter=SSE_READS
        )
        if events:
            for event in events:
                yield format_event(event)
                last_id = event.id
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
