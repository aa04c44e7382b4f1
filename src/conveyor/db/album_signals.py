"""Per-album wake-ups for live event streams: NOTIFY in the writer's transaction on PostgreSQL,
heard on the process's one LISTEN connection.

A step that writes an album event (or a deletion of the album) calls :func:`notify_album` in
the same transaction; PostgreSQL delivers the notification on commit, to every process that
listens (on the process's one ``LISTEN`` connection, :mod:`conveyor.db.listener`, shared with
the pool's wake-ups). :class:`AlbumSignals` keeps a counter per album that grows with each
notification, so a process's one reader per album (:mod:`conveyor.api.live`) reads the
outbox exactly when there is something to read, and idle albums cost no query at all. SQLite
has no such signal: there the readers poll (once per album and process, not once per
subscriber).
"""

from __future__ import annotations

import threading

from sqlalchemy import Connection, Engine, text

from conveyor.db.engine import is_postgresql
from conveyor.db.listener import Subscription, listener_of

__all__ = ["ALBUM_CHANNEL", "AlbumSignals", "notify_album"]

ALBUM_CHANNEL = "conveyor_albums"


def notify_album(conn: Connection, album_id: int) -> None:
    """Announce new events of ``album_id`` when ``conn``'s transaction commits (PostgreSQL)."""
    if conn.dialect.name == "postgresql":
        conn.execute(
            text("SELECT pg_notify(:channel, :album)"),
            {"channel": ALBUM_CHANNEL, "album": str(album_id)},
        )


class AlbumSignals:
    """Counters of album notifications heard by this process.

    Args:
        engine: the database; on PostgreSQL :meth:`start` opens the LISTEN connection.

    Attributes:
        listening: True while the LISTEN connection is up (readers may then poll rarely).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()
        self._subscription: Subscription | None = None
        self.listening = False

    def generation(self, album_id: int) -> int:
        """A counter that grows with every notification about ``album_id``."""
        return self._counts.get(album_id, 0)

    def bump(self, album_id: int) -> None:
        """Count a notification about ``album_id`` (also for wake-ups within the process)."""
        with self._lock:
            self._counts[album_id] = self._counts.get(album_id, 0) + 1

    def start(self) -> None:
        """On PostgreSQL, start hearing notifications (the process's one
        :class:`~conveyor.db.listener.Listener` of the engine); nothing on SQLite."""
        if not is_postgresql(self._engine) or self._subscription is not None:
            return
        self._subscription = Subscription(
            ALBUM_CHANNEL, heard=self._heard, listening=self._listening, lost=self._lost
        )
        listener_of(self._engine).subscribe(self._subscription)

    def close(self) -> None:
        """Stop listening."""
        if self._subscription is not None:
            listener_of(self._engine).unsubscribe(self._subscription)
            self._subscription = None
        self.listening = False

    def _heard(self, payload: str) -> None:
        if payload.isascii() and payload.isdigit():
            self.bump(int(payload))

    def _listening(self, _times: int) -> None:
        self.listening = True

    def _lost(self) -> None:
        self.listening = False
