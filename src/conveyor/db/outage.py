"""Outages, told once: one log line when a service (the database, the object store) stops
answering, one when it answers again, whatever the number of threads and requests that met it in
between.

Without this, every worker thread logged a traceback per second and every request one more
(about 24,700 lines for a 45 s outage), burying the one fact the operator needs. Callers hand
the exceptions they catch to :meth:`Outage.failed` — it says whether the exception *is* an
outage (for the database: connection refused or lost, pool exhausted, database locked) and, for
the first of an outage, logs it — and report each success with :meth:`Outage.succeeded`.

An outage ends only when the service has answered for :attr:`Outage.settle` seconds with no
failure in between, not on the first success: while a server shuts down, a connection that
still gets through would otherwise end the outage ("reachable again after 0.0 s") and the next
failure start a second one. The first success after failures starts the *recovery*; a failure
cancels it (the outage goes on, unlogged); a success ``settle`` seconds into the recovery ends
the outage with one line, and so does a failure that comes later than that (the service was
back for long enough: the old outage ended where its recovery began, and a new one starts).
One :data:`DATABASE` instance serves the whole process (:data:`conveyor.objects.STORAGE` is the
object store's).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = ["DATABASE", "SETTLE", "Outage", "as_outage", "is_outage"]

log = logging.getLogger("conveyor.db")

#: Seconds a service must answer, with no failure in between, before its outage is over: long
#: enough to outlast the last connections that get through while a server shuts down, short
#: beside the 5 s Retry-After clients are given.
SETTLE = 1.0


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the database cannot be reached or used right now (not a bad
    statement): a refused or lost connection, a full pool, a locked SQLite file."""
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeout):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def as_outage(exc: BaseException) -> BaseException:
    """psycopg's own connection errors (listeners bypass SQLAlchemy) as SQLAlchemy's."""
    import psycopg

    if isinstance(exc, psycopg.OperationalError):
        return OperationalError("LISTEN", None, exc)
    return exc


def _summary(exc: BaseException) -> str:
    cause = getattr(exc, "orig", None) or exc
    first = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {first[0] if first else ''}".strip()


class Outage:
    """The outage state of one service in this process (thread-safe).

    Args:
        service: the service's name in the log lines (``database``, ``storage``).
        classify: whether an exception means the service is unreachable (:func:`is_outage`).
        logger: where the two lines go.
        settle: seconds of answers without a failure that end an outage (:data:`SETTLE`).
        clock: monotonic seconds (``time.monotonic``; tests pass a fake clock).
        is_full: whether an outage exception says the service answers but has no room (a
            full disk): its lines then say ``full`` and ``takes writes again``, not
            ``unreachable`` and ``reachable again``.

    Attributes:
        since: ``clock()`` of the first failure of the current outage, or None.
        failures: failures seen in the current outage.
        full: True while the current outage's latest failure was a full one (``is_full``).
    """

    def __init__(
        self,
        service: str = "database",
        classify: Callable[[BaseException], bool] = is_outage,
        logger: logging.Logger = log,
        *,
        settle: float = SETTLE,
        clock: Callable[[], float] = time.monotonic,
        is_full: Callable[[BaseException], bool] = lambda _exc: False,
    ) -> None:
        self.service = service
        self.is_full = is_full
        self.full = False
        self.classify = classify
        self.settle = settle
        self.clock = clock
        self._log = logger
        self._lock = threading.Lock()
        self.since: float | None = None
        self.failures = 0
        self._recovering: float | None = None

    @property
    def down(self) -> bool:
        """True from the first failure of an outage until it has ended (see the module)."""
        return self.since is not None

    def failed(self, exc: BaseException, where: str) -> bool:
        """Note a failure met by ``where`` (``API``, ``worker``, ...).

        Returns:
            True when ``exc`` is an outage (logged if it is the first of one); False when it is
            some other error, which the caller reports as it would any other.
        """
        if not self.classify(exc):
            return False
        full = self.is_full(exc)
        ended: tuple[float, int, bool] | None = None
        with self._lock:
            now = self.clock()
            if self.since is not None and self._recovering is not None:
                if now - self._recovering >= self.settle:
                    ended = self._end()
                else:
                    self._recovering = None  # a lucky answer, not the end of the outage
            self.failures += 1
            self.full = full
            starts = self.since is None
            if starts:
                self.since = now
        if ended is not None:
            self._log_end(*ended)
        if starts:
            self._log.error(
                "%s %s (first met by the %s): %s; further failures are not logged until it %s",
                self.service,
                "full" if full else "unreachable",
                where,
                _summary(exc),
                "takes writes again" if full else "answers again",
            )
        return True

    def succeeded(self) -> None:
        """Note that the service answered; ends an outage (one log line) once it has answered
        for :attr:`settle` seconds with no failure in between."""
        if self.since is None:  # the common case, without the lock
            return
        with self._lock:
            if self.since is None:
                return
            now = self.clock()
            if self._recovering is None:
                self._recovering = now
                return
            if now - self._recovering < self.settle:
                return
            ended = self._end()
        self._log_end(*ended)

    def reset(self) -> None:
        """Forget any outage without a log line (tests, between cases)."""
        with self._lock:
            self.since = self._recovering = None
            self.failures = 0
            self.full = False

    def _end(self) -> tuple[float, int, bool]:
        assert self.since is not None and self._recovering is not None
        ended = (self._recovering - self.since, self.failures, self.full)
        self.since = self._recovering = None
        self.failures = 0
        self.full = False
        return ended

    def _log_end(self, lasted: float, failures: int, full: bool) -> None:
        self._log.warning(
            "%s %s again after %.1f s (%d failed attempts meanwhile)",
            self.service,
            "takes writes" if full else "reachable",
            lasted,
            failures,
        )


#: The process's one outage state for its database.
DATABASE = Outage()
