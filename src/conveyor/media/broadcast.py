"""Album events for live subscribers, fed from the durable per-album outbox (M5).

Steps write an event row to ``album_events`` in the same transaction as their save, so an event
exists exactly when its effect does. Subscribers read the outbox after the last id they saw; a
wake-up (the process's :class:`~conveyor.db.notify.Notifier`, bumped whenever a step advances)
makes them look at once, and a poll every ``poll_interval`` seconds covers events written by
other processes. Delivery is in id order, and ids are taken in commit order per album (the
writer locks the album row), so a subscriber that reconnects with the last id it saw misses
nothing and sees nothing twice.

Usage::

    broadcast = AlbumBroadcast(engine, notifier)
    with broadcast.subscribe(album_id, last_event_id=None) as sub:
        for event in sub:           # blocks; ends when sub.close() or stop is set
            ...
    sub.poll(timeout=15.0)          # or: a batch, [] when idle (SSE keep-alive)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from sqlalchemy import Engine, RowMapping

from conveyor.db.notify import Notifier
from conveyor.media import queries

__all__ = ["AlbumBroadcast", "AlbumEvent", "Subscription"]


@dataclass(frozen=True)
class AlbumEvent:
    """One outbox event.

    Attributes:
        id: the event id; pass the last one seen as ``last_event_id`` to resume.
        album_id: the album.
        item_id: the item the event is about.
        kind: ``item.ready`` (variants), ``item.playback_ready`` (video playback),
            ``item.halted`` (cannot be processed; ``payload["reason"]``, ``payload["error"]``).
        payload: JSON: ``item_id``, ``kind`` (photo|video), ``stage``, and ``roles`` (role →
            ``mime_type``, ``size`` bytes, ``width``, ``height``) or the halt reason.
        created_at: epoch seconds.
    """

    id: int
    album_id: int
    item_id: int
    kind: str
    payload: dict[str, Any]
    created_at: float

    @classmethod
    def from_row(cls, row: RowMapping) -> AlbumEvent:
        """Build from an ``album_events`` row."""
        return cls(
            id=int(row["id"]),
            album_id=int(row["album_id"]),
            item_id=int(row["item_id"]),
            kind=str(row["kind"]),
            payload=dict(row["payload"]),
            created_at=float(row["created_at"]),
        )


class AlbumBroadcast:
    """Reads the album outbox for subscribers.

    Args:
        engine: the database.
        notifier: wake-ups of this process (the worker pool's); a private one when omitted, in
            which case subscribers learn of events by polling only.
        poll_interval: seconds between outbox reads of an idle subscriber.
    """

    def __init__(
        self, engine: Engine, notifier: Notifier | None = None, *, poll_interval: float = 1.0
    ) -> None:
        self.engine = engine
        self.notifier = notifier or Notifier()
        self.poll_interval = poll_interval

    def events_after(self, album_id: int, last_id: int, limit: int = 100) -> list[AlbumEvent]:
        """The album's events with id above ``last_id``, oldest first (at most ``limit``)."""
        with self.engine.connect() as conn:
            rows = queries.events_after(conn, album_id, last_id, limit)
        return [AlbumEvent.from_row(r) for r in rows]

    def album_exists(self, album_id: int) -> bool:
        """True while the album exists (its outbox goes with it when it is deleted)."""
        with self.engine.connect() as conn:
            return queries.album_by_id(conn, album_id) is not None

    def latest_id(self, album_id: int) -> int:
        """The album's newest event id (0 without events)."""
        with self.engine.connect() as conn:
            return queries.latest_event_id(conn, album_id)

    def announce(self) -> None:
        """Wake this process's subscribers (after writing events outside a worker step)."""
        self.notifier.wake_local()

    def subscribe(
        self,
        album_id: int,
        last_event_id: int | None = None,
        *,
        stop: threading.Event | None = None,
    ) -> Subscription:
        """Subscribe to an album's events.

        Args:
            album_id: the album.
            last_event_id: the last id this subscriber saw (a reconnect): delivery continues
                right after it. None = only events written from now on; 0 = the whole history.
            stop: ends iteration when set (e.g. on SIGINT).
        """
        start = self.latest_id(album_id) if last_event_id is None else last_event_id
        return Subscription(self, album_id, start, stop or threading.Event())


class Subscription:
    """One subscriber's position in an album's outbox; iterate it or :meth:`poll` it.

    Attributes:
        album_id: the album.
        last_id: the id of the last event delivered (the value to reconnect with).
    """

    def __init__(
        self, broadcast: AlbumBroadcast, album_id: int, last_id: int, stop: threading.Event
    ) -> None:
        self._broadcast = broadcast
        self.album_id = album_id
        self.last_id = last_id
        self._stop = stop
        self._closed = threading.Event()

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or once ``stop`` is set."""
        return self._closed.is_set() or self._stop.is_set()

    def poll(self, timeout: float) -> list[AlbumEvent]:
        """The next events in order, waiting up to ``timeout`` seconds; [] when none came.

        Advances :attr:`last_id` past what it returns.
        """
        notifier = self._broadcast.notifier
        deadline = time.monotonic() + timeout
        while True:
            since = notifier.generation
            events = self._broadcast.events_after(self.album_id, self.last_id)
            if events:
                self.last_id = events[-1].id
                return events
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed:
                return []
            notifier.wait(since, min(remaining, self._broadcast.poll_interval))

    def __iter__(self) -> Iterator[AlbumEvent]:
        while not self.closed:
            yield from self.poll(self._broadcast.poll_interval)

    def close(self) -> None:
        """End iteration (from any thread) within one poll interval."""
        self._closed.set()
        self._broadcast.notifier.wake_local()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
