"""Database outages, told once: one log line when the database stops answering, one when it
answers again, whatever the number of threads and requests that met it in between.

Without this, every worker thread logged a traceback per second and every request one more
(about 24,700 lines for a 45 s outage), burying the one fact the operator needs. Callers hand
the exceptions they catch to :meth:`Outage.failed` — it says whether the exception *is* an
outage (connection refused or lost, pool exhausted, database locked) and, for the first of an
outage, logs it — and report each success with :meth:`Outage.succeeded`, which logs the end
once. One :data:`DATABASE` instance serves the whole process.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = ["DATABASE", "Outage", "as_outage", "is_outage"]

log = logging.getLogger("conveyor.db")


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
    """The outage state of one database in this process (thread-safe).

    Attributes:
        since: ``time.monotonic()`` of the first failure of the current outage, or None.
        failures: failures seen in the current outage.
    """

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self.since: float | None = None
        self.failures = 0

    @property
    def down(self) -> bool:
        """True between the first failure of an outage and the next success."""
        return self.since is not None

    def failed(self, exc: BaseException, where: str) -> bool:
        """Note a failure met by ``where`` (``api``, ``worker``, ...).

        Returns:
            True when ``exc`` is an outage (logged if it is the first of one); False when it is
            some other error, which the caller reports as it would any other.
        """
        if not is_outage(exc):
            return False
        with self._lock:
            self.failures += 1
            if self.since is not None:
                return True
            self.since = time.monotonic()
        self._log.error(
            "database unreachable (first met by the %s): %s; further failures are not logged "
            "until it answers again",
            where,
            _summary(exc),
        )
        return True

    def succeeded(self) -> None:
        """Note that the database answered; ends an outage with one log line."""
        if self.since is None:  # the common case, without the lock
            return
        with self._lock:
            if self.since is None:
                return
            lasted = time.monotonic() - self.since
            failures, self.since, self.failures = self.failures, None, 0
        self._log.warning(
            "database reachable again after %.1f s (%d failed attempts meanwhile)",
            lasted,
            failures,
        )


#: The process's one outage state for its database.
DATABASE = Outage()
