"""One ``LISTEN`` connection per engine and process, for every channel (PostgreSQL).

The pool's wake-ups (:mod:`conveyor.db.notify`) and the album events
(:mod:`conveyor.db.album_signals`) both hear PostgreSQL's notifications here: one daemon
thread, one connection, reconnecting after an outage (told once, :mod:`conveyor.db.outage`).
A subscriber learns each time its channel is listened to again (notifications sent while no
connection listened are lost, so it should look once) and when the connection is lost.
SQLite has no such signal: nothing here runs there.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from conveyor.db import outage
from conveyor.db.engine import is_postgresql

__all__ = ["Listener", "Subscription", "listener_of"]

log = logging.getLogger("conveyor.notify")

_LISTENERS: weakref.WeakKeyDictionary[Engine, Listener] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def listener_of(engine: Engine) -> Listener:
    """This process's listener of ``engine`` (one per engine, made on first use)."""
    with _LOCK:
        found = _LISTENERS.get(engine)
        if found is None:
            found = _LISTENERS[engine] = Listener(engine)
        return found


@dataclass(eq=False)
class Subscription:
    """One subscriber's interest in a channel.

    Attributes:
        channel: the notification channel (a plain identifier).
        heard: called with each notification's payload, on the listener's thread.
        listening: called each time the channel is listened to (the first time and after
            every reconnect), with the count of times so far.
        lost: called when the connection is lost.
    """

    channel: str
    heard: Callable[[str], None]
    listening: Callable[[int], None] = lambda _times: None
    lost: Callable[[], None] = lambda: None
    times: int = field(default=0)


class Listener:
    """The ``LISTEN`` connection of one engine in this process (PostgreSQL only).

    Args:
        engine: the database whose notifications are heard.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._subscriptions: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def subscribe(self, subscription: Subscription) -> None:
        """Start hearing ``subscription``'s channel; starts the thread on PostgreSQL.

        A channel new to a running connection is listened to within a second.
        """
        if not is_postgresql(self._engine):
            return
        with self._lock:
            self._subscriptions.append(subscription)
            if self._thread is None or not self._thread.is_alive():
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(self._stop,), name="conveyor-listen", daemon=True
                )
                self._thread.start()

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop hearing for ``subscription``; the thread ends with the last one."""
        with self._lock:
            if subscription in self._subscriptions:
                self._subscriptions.remove(subscription)
            if not self._subscriptions:
                self._stop.set()
                self._thread = None

    def _current(self) -> list[Subscription]:
        with self._lock:
            return list(self._subscriptions)

    def _run(self, stop: threading.Event) -> None:
        import psycopg

        url = self._engine.url.set(drivername="postgresql")
        dsn = url.render_as_string(hide_password=False)
        while not stop.is_set():
            listened: set[Subscription] = set()
            try:
                conn: Any = psycopg.connect(dsn, autocommit=True)
                with conn:
                    outage.DATABASE.succeeded()
                    while not stop.is_set():
                        subscriptions = self._current()
                        self._listen_to_new(conn, subscriptions, listened)
                        for note in conn.notifies(timeout=1.0, stop_after=1):
                            for subscription in subscriptions:
                                if subscription.channel == note.channel:
                                    subscription.heard(note.payload)
            except Exception as exc:
                for subscription in self._current():
                    if subscription in listened:
                        subscription.lost()
                if not outage.DATABASE.failed(outage.as_outage(exc), "wake-up listener"):
                    log.warning("wake-up listener lost its connection; retrying", exc_info=True)
                stop.wait(2.0)

    @staticmethod
    def _listen_to_new(
        conn: Any, subscriptions: list[Subscription], listened: set[Subscription]
    ) -> None:
        channels: set[str] = set()
        for subscription in subscriptions:
            if subscription in listened:
                continue
            if subscription.channel not in channels:
                conn.execute(f"LISTEN {subscription.channel}")
                channels.add(subscription.channel)
            listened.add(subscription)
            subscription.times += 1
            subscription.listening(subscription.times)
