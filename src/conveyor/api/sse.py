"""Server-Sent Events of an album, fed by the process's one reader of that album (M5).

Wire format, one block per event::

    id: 42
    event: item.ready
    data: {"album_id": 3, "item_id": 17, "kind": "item.ready", ...}

A reconnecting client sends ``Last-Event-ID`` (browsers do this by themselves) or
``?last_event_id=``; delivery continues right after that id, so nothing is missed and nothing
repeats. Without either, the stream starts at the newest event now (the album page's
``last_event_id`` closes the gap between reading the album and subscribing). An idle stream
gets a ``: keep-alive`` comment every ``[api] sse_heartbeat`` seconds.

Events come from the album's :class:`~conveyor.api.live.AlbumFeed` (one outbox reader per
album and process, woken by NOTIFY on PostgreSQL); a subscriber further behind than the feed's
window reads the outbox itself until it has caught up. While the client drains, the generator
is simply suspended at ``yield`` (TCP back-pressure): nothing is queued for it, no worker
waits on it. When the album is deleted the stream sends ``album.deleted`` and ends; when the
stream's token is revoked (re-checked for all streams together every few seconds) it ends, and
the browser's reconnect gets 401.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator

import anyio
import anyio.to_thread

from conveyor.api.live import READS, StreamSlot
from conveyor.clock import iso_utc
from conveyor.media.broadcast import AlbumEvent

__all__ = ["album_stream", "format_event"]

# Longest wait between two looks at the stream's state (seconds).
_TICK = 0.5
# Reconnect delay a browser should use (milliseconds).
_RETRY_MS = 2000
_BATCH = 100


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
    slot: StreamSlot, last_id: int, *, heartbeat: float, closing: threading.Event
) -> AsyncIterator[str]:
    """The SSE text of one subscriber, from just after ``last_id``, until ``closing`` is set.

    Args:
        slot: the stream's place in its album's feed (closed when the stream ends).
        last_id: the last event id the client has.
        heartbeat: seconds of silence before a keep-alive comment.
        closing: the server is stopping; end the stream so it can.
    """
    feed = slot.feed
    broadcast = slot.hub.broadcast
    try:
        yield f"retry: {_RETRY_MS}\n\n"
        last_write = time.monotonic()
        while not closing.is_set():
            if slot.revoked:
                why = "the album is no longer shared with you" if slot.unshared else ""
                yield f": {why or 'the token was revoked'}\n\n"
                return
            changed = feed.changed()
            events = feed.events_after(last_id)
            if events is None:  # further behind than the feed's window: catch up alone
                events = await anyio.to_thread.run_sync(
                    broadcast.events_after, feed.album_id, last_id, _BATCH, limiter=READS
                )
            if events:
                for event in events:
                    yield format_event(event)
                    last_id = event.id
                last_write = time.monotonic()
                continue
            if feed.deleted:
                data = json.dumps({"album_id": feed.album_id})
                yield f"event: album.deleted\ndata: {data}\n\n"
                return
            wait = min(_TICK, max(0.0, heartbeat - (time.monotonic() - last_write)))
            with anyio.move_on_after(wait):
                await changed.wait()
            if time.monotonic() - last_write >= heartbeat:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
    finally:
        slot.close()
