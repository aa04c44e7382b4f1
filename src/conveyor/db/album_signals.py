"""Per-album wake-ups for live event streams: NOTIFY in the writer's transaction on PostgreSQL,
one LISTEN connection per process.

A step that writes an album event (or a deletion of the album) calls :func:`notify_album` in
the same transaction; PostgreSQL delivers the notification on commit, to every process that
listens. :class:`AlbumSignals` keeps a counter per album that grows with each notification, so
a process's one reader per album (:mod:`conveyor.api.live`) reads the outbox exactly when
there is something to read, and idle albums cost no query at all. SQLite has no such signal:
there the readers poll (once per album and process, not once per subscriber).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import Connection, Engine, text

from conveyor.db import outage
from conveyor.db.engine import is_postgresql

__all__ = ["ALBUM_CHANNEL", "AlbumSignals", "notify_album"]

ALBUM_CHANNEL = "conveyor_albums"
log = logging.getLogger("conveyor.notify")


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
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = False

    def generation(self, album_id: int) -> int:
        """A counter that grows with every notification about ``album_id``."""
        return self._counts.get(album_id, 0)

    def bump(self, album_id: int) -> None:
        """Count a notification about ``album_id`` (also for wake-ups within the process)."""
        with self._lock:
            self._counts[album_id] = self._counts.get(album_id, 0) + 1

    def start(self) -> None:
        """On PostgreSQL, start hearing notifications (a daemon thread); nothing on SQLite."""
        if not is_postgresql(self._engine) or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._listen, name="conveyor-albums", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop listening."""
        self._closing.set()

    def _listen(self) -> None:
        import psycopg

        url = self._engine.url.set(drivername="postgresql")
        dsn = url.render_as_string(hide_password=False)
        while not self._closing.is_set():
            try:
                conn: Any = psycopg.connect(dsn, autocommit=True)
                with conn:
                    conn.execute(f"LISTEN {ALBUM_CHANNEL}")
                    self.listening = True
                    while not self._closing.is_set():
                        for note in conn.notifies(timeout=1.0):
                            if note.payload.isascii() and note.payload.isdigit():
                                self.bump(int(note.payload))
            except Exception as exc:
                self.listening = False
                wrapped = outage.as_outage(exc)
                if not outage.DATABASE.failed(wrapped, "album listener"):
                    log.warning("album listener lost its connection; retrying", exc_info=True)
                self._closing.wait(2.0)
        self.listening = False
