"""The live stream of an owner's recordings: their journal rows (D14) as Server-Sent Events.

Like the album stream (:mod:`conveyor.api.sse`), each connection reads the durable journal
itself after the last id it delivered, so a reconnecting page (``Last-Event-ID`` or
``?last_event_id=``) gets every change it missed exactly once, and a slow page slows only its
own stream. The data of each event names the record, its stage and the outcome.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.to_thread
from sqlalchemy import Engine

from conveyor.api.sse import SSE_READS
from conveyor.clock import iso_utc
from conveyor.db.notify import Notifier
from conveyor.web import queries

__all__ = ["journal_stream"]

_TICK = 0.1
_RETRY_MS = 2000
_BATCH = 100
_AUTH_CHECK = 5.0


def _read(engine: Engine, owner: str, after: int, record_id: int | None) -> list[tuple[int, str]]:
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
            "created_at": iso_utc(r["created_at"]),
        }
        blocks.append((int(r["id"]), f"id: {r['id']}\nevent: record\ndata: {json.dumps(data)}\n\n"))
    return blocks


async def journal_stream(
    engine: Engine,
    notifier: Notifier,
    owner: str,
    last_id: int,
    *,
    record_id: int | None,
    heartbeat: float,
    poll_interval: float,
    closing: threading.Event,
    still_allowed: Callable[[], bool],
) -> AsyncIterator[str]:
    """SSE text of ``owner``'s record changes after ``last_id`` until ``closing`` is set or
    the session ends (``still_allowed`` False, checked at most every 5 s).

    Args:
        record_id: only this record's changes (its page), or all of the owner's (the list).
        heartbeat: seconds of silence before a ``: keep-alive`` comment.
        poll_interval: seconds between reads without a wake-up (other processes' writes).
    """
    yield f"retry: {_RETRY_MS}\n\n"
    last_write = last_check = time.monotonic()
    check_every = min(heartbeat, _AUTH_CHECK)
    while not closing.is_set():
        if time.monotonic() - last_check >= check_every:
            if not await anyio.to_thread.run_sync(still_allowed, limiter=SSE_READS):
                yield ": signed out\n\n"
                return
            last_check = time.monotonic()
        generation = notifier.generation
        blocks = await anyio.to_thread.run_sync(
            _read, engine, owner, last_id, record_id, limiter=SSE_READS
        )
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
