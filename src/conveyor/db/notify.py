"""Wake-ups for idle workers: in-process always, plus LISTEN/NOTIFY across processes on PostgreSQL.

Whoever makes work claimable says so once, with :func:`announce_work` in its transaction
(admission, resume, a hand-off between lanes, a claim given back on stop): the notifiers of
this process built on the same engine wake when that transaction's connection goes back to the
pool (after the commit, so the woken worker sees the work), and on PostgreSQL every listening
process hears it at commit.
Callers never publish by hand after an intake or a resume.

SQLite has no cross-process signal, so there a worker in another process finds new work on its
next poll (``[pipeline] poll_interval``). The generation counter makes a wake-up that arrives
between "found no work" and "start waiting" still count (no lost wake-ups).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from sqlalchemy import Connection, Engine, event, text

from conveyor.db import outage
from conveyor.db.engine import is_postgresql
from conveyor.db.listener import Subscription, listener_of

__all__ = ["CHANNEL", "Notifier", "announce_work"]

CHANNEL = "conveyor_work"
log = logging.getLogger("conveyor.notify")

# Marks on the pooled connection's info: announced in the open transaction, then committed and
# not yet told to this process's notifiers.
_ANNOUNCED = "conveyor.work_announced"
_COMMITTED = "conveyor.work_committed"
_LOCAL: weakref.WeakKeyDictionary[Engine, weakref.WeakSet[Notifier]] = weakref.WeakKeyDictionary()


def announce_work(conn: Connection) -> None:
    """Say, in ``conn``'s open transaction, that work may be claimable once it commits.

    After the commit, this process's notifiers of ``conn``'s engine wake; on PostgreSQL the
    notification reaches every listening process at commit (identical ones of one transaction
    fold into one, so a batch of hand-offs costs one wake-up). A rollback tells no one.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})
    conn.info[_ANNOUNCED] = True


def _local_notifiers(engine: Engine) -> weakref.WeakSet[Notifier]:
    """The notifiers of ``engine`` in this process, hearing its commits from the first one on."""
    found = _LOCAL.get(engine)
    if found is not None:
        return found
    found = _LOCAL[engine] = weakref.WeakSet()
    notifiers = found  # the listeners hold the set, not the engine

    def committed(conn: Connection) -> None:
        if conn.info.pop(_ANNOUNCED, False):
            conn.info[_COMMITTED] = True

    def rolled_back(conn: Connection) -> None:
        # A connection lost mid-transaction is rolled back invalidated: reading its info then
        # would try to reconnect inside the rollback (PendingRollbackError, not an outage) and
        # fail the caller's rollback; its info is dropped with it anyway.
        if not conn.invalidated:
            conn.info.pop(_ANNOUNCED, None)

    def checked_in(_dbapi: Any, record: Any) -> None:
        # The pool takes the connection back after its transaction ended: the work is visible.
        if record is not None and record.info.pop(_COMMITTED, False):
            for notifier in list(notifiers):
                notifier.wake_local()

    event.listen(engine, "commit", committed)
    event.listen(engine, "rollback", rolled_back)
    event.listen(engine, "checkin", checked_in)
    return found


class Notifier:
    """Wake workers when new work may be claimable.

    Args:
        engine: the database; work announced on it (:func:`announce_work`) wakes this notifier,
            and on PostgreSQL :meth:`start_listening` also hears other processes.
    """

    def __init__(self, engine: Engine | None = None) -> None:
        self._engine = engine
        if engine is not None:
            _local_notifiers(engine).add(self)
        self._cond = threading.Condition()
        self._generation = 0
        self._due: float | None = None
        self._subscription: Subscription | None = None
        self.connections = 0
        """Times the listener has listened for this notifier (on PostgreSQL); each after the
        first wakes."""

    @property
    def generation(self) -> int:
        """A counter that grows with every wake-up; pass it to :meth:`wait`."""
        with self._cond:
            return self._generation

    def wake_local(self) -> None:
        """Wake the waiters of this process."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wake_after(self, delay: float) -> None:
        """Wake this process's waiters once ``delay`` seconds from now (a retry pause ends)."""
        # No timer thread per pause: waiters shorten their sleep to the earliest due time.
        due = time.monotonic() + max(0.0, delay)
        with self._cond:
            if self._due is None or due < self._due:
                self._due = due
                self._cond.notify_all()

    def publish(self) -> None:
        """Announce new work: to this process, and on PostgreSQL to every listening process."""
        self.wake_local()
        if self._engine is not None and is_postgresql(self._engine):
            try:
                with self._engine.begin() as conn:
                    conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})
            except Exception as exc:  # a missed wake-up only delays work until the next poll
                if not outage.DATABASE.failed(exc, "wake-up publisher"):
                    log.warning("could not publish a wake-up", exc_info=True)

    def wait(self, since: int, timeout: float) -> bool:
        """Sleep until a wake-up after generation ``since`` or ``timeout`` seconds.

        Returns:
            True when woken, False on timeout.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._generation == since:
                now = time.monotonic()
                if self._due is not None and self._due <= now:
                    # The first waiter to see a scheduled wake-up come due wakes everyone.
                    self._due = None
                    self._generation += 1
                    self._cond.notify_all()
                    return True
                end = deadline if self._due is None else min(deadline, self._due)
                if end <= now and end == deadline:
                    return False
                self._cond.wait(max(0.0, end - now))
            return True

    def start_listening(self) -> None:
        """On PostgreSQL, hear wake-ups published by other processes (the process's one
        :class:`~conveyor.db.listener.Listener` of the engine)."""
        if self._engine is None or not is_postgresql(self._engine) or self._subscription:
            return
        self._subscription = Subscription(
            CHANNEL, heard=lambda _payload: self.wake_local(), listening=self._listening
        )
        listener_of(self._engine).subscribe(self._subscription)

    def _listening(self, times: int) -> None:
        self.connections = times
        if times > 1:
            # Wake-ups sent while no connection listened are lost: look once now.
            self.wake_local()

    def close(self) -> None:
        """Stop listening."""
        if self._engine is not None and self._subscription is not None:
            listener_of(self._engine).unsubscribe(self._subscription)
            self._subscription = None
        self.wake_local()
