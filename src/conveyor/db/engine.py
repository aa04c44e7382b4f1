"""Build a SQLAlchemy engine for SQLite (embedded default) or PostgreSQL.

This is the one dialect branch besides :mod:`conveyor.db.notify`: SQLite gets WAL, a busy
timeout, foreign keys and ``BEGIN IMMEDIATE`` (writers serialise up front instead of failing on
lock upgrade); PostgreSQL gets a pool sized for the worker threads and the psycopg 3 driver.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

__all__ = [
    "autocommit",
    "is_postgresql",
    "make_engine",
    "normalize_url",
]

# Seconds a SQLite writer waits for the lock before giving up; long, because a burst of
# workers on one file is normal, and an error here would only be retried.
_SQLITE_BUSY_TIMEOUT_MS = 60_000


def normalize_url(url: str) -> URL:
    """Return the SQLAlchemy URL for ``url``, choosing psycopg 3 for plain ``postgresql://``."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def is_postgresql(engine: Engine) -> bool:
    """True when ``engine`` talks to PostgreSQL."""
    return engine.dialect.name == "postgresql"


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    """Create an engine for ``url``.

    Args:
        url: ``sqlite:///path/to/file.db`` or ``postgresql://user@host:port/db``.
        pool_size: connections kept open on PostgreSQL (workers + API + listeners).

    Returns:
        A configured :class:`sqlalchemy.Engine`. For a SQLite file, its folder is created.

    Raises:
        sqlalchemy.exc.ArgumentError: the URL is malformed or names an unknown dialect.
    """
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    # No pre-ping: it costs a round trip per checkout; a connection that died is invalidated on
    # its first failing statement and the caller (a worker loop) retries with a fresh one.
    return create_engine(parsed, pool_size=pool_size, max_overflow=pool_size)


@contextmanager
def autocommit(conn: Connection) -> Iterator[Connection]:
    """Run each statement on ``conn`` inside the block as its own transaction: on PostgreSQL
    no ``BEGIN`` and no ``COMMIT`` go to the server, two round trips fewer for a one-statement
    transaction (a worker in another rack pays each). ``conn`` must not be in a transaction;
    its isolation level is set back after the block (a client-side switch in psycopg). On
    SQLite, in the same process, the block is one transaction.
    """
    if conn.dialect.name != "postgresql":
        with conn.begin():
            yield conn
        return
    before = conn.get_execution_options().get("isolation_level", conn.default_isolation_level)
    conn.execution_options(isolation_level="AUTOCOMMIT")
    try:
        yield conn
    finally:
        if not conn.invalidated and not conn.closed:
            if conn.in_transaction():
                # SQLAlchemy's own transaction object, begun even in autocommit; ending it
                # sends nothing (the server has no transaction open).
                conn.commit()
            conn.execution_options(isolation_level=before)


class WriterGate:
    """The write lock of one SQLite file, as the threads of this process queue for it.

    SQLite lets one writer in at a time; a connection that finds the lock taken waits in its
    busy handler, which polls by sleeping 1, 2, 5, 10, 15, 20, 25 … ms. Between the threads of
    one process (a lane's producer and completer, the web app's requests) that turns a wait of
    a fraction of a millisecond into several. Every transaction of this process's engines on a
    file therefore first takes that file's gate (a lock that hands over at once when released),
    then ``BEGIN IMMEDIATE``; other processes still meet SQLite's own lock and busy handler.

    A thread that already holds the gate through another connection (a transaction opened
    inside another on a second connection, which SQLite itself would refuse after its busy
    timeout) passes straight to SQLite, and a gate not free within the busy timeout lets the
    transaction try SQLite's lock anyway: the gate never turns SQLite's error into a hang.
    """

    _gates: ClassVar[dict[str, WriterGate]] = {}
    _gates_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, timeout: float) -> None:
        self._lock = threading.Lock()
        self._timeout = timeout
        self._holder: Any = None  # the DBAPI connection in the gate
        self._thread: int | None = None

    @classmethod
    def of(cls, database: str, timeout: float) -> WriterGate:
        """The gate of the SQLite file ``database`` (one per file and process)."""
        key = database if database.startswith(("file:", ":memory:")) else os.path.abspath(database)
        with cls._gates_lock:
            gate = cls._gates.get(key)
            if gate is None:
                gate = cls._gates[key] = cls(timeout)
            return gate

    def enter(self, dbapi_connection: Any) -> None:
        """Wait for the gate on behalf of ``dbapi_connection`` (before its ``BEGIN``)."""
        if self._thread == threading.get_ident() or not self._lock.acquire(timeout=self._timeout):
            return
        self._holder = dbapi_connection
        self._thread = threading.get_ident()

    def leave(self, dbapi_connection: Any) -> None:
        """Open the gate if ``dbapi_connection`` holds it (its transaction ended)."""
        if self._holder is dbapi_connection and dbapi_connection is not None:
            self._holder = None
            self._thread = None
            self._lock.release()


def _sqlite_engine(url: URL) -> Engine:
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": _SQLITE_BUSY_TIMEOUT_MS / 1000},
        pool_size=20,
        max_overflow=20,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the driver so that "begin" below decides the mode.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    gate = WriterGate.of(database or ":memory:", _SQLITE_BUSY_TIMEOUT_MS / 1000)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Straight to the driver: the statement runs before every transaction and needs none
        # of SQLAlchemy's execution machinery.
        dbapi_connection = connection.connection.dbapi_connection
        gate.enter(dbapi_connection)
        try:
            dbapi_connection.execute("BEGIN IMMEDIATE")
        except BaseException:
            gate.leave(dbapi_connection)
            raise

    @event.listens_for(engine, "commit")
    def _on_commit(connection: Any) -> None:
        # The event comes before the driver's commit: commit here, so that the gate opens
        # only once SQLite's lock is free (the driver's own commit then finds nothing to do).
        dbapi_connection = connection.connection.dbapi_connection
        if dbapi_connection.in_transaction:
            dbapi_connection.execute("COMMIT")
        gate.leave(dbapi_connection)

    @event.listens_for(engine, "rollback")
    def _on_rollback(connection: Any) -> None:
        dbapi_connection = connection.connection.dbapi_connection
        try:
            if dbapi_connection is not None and dbapi_connection.in_transaction:
                dbapi_connection.execute("ROLLBACK")
        finally:
            gate.leave(dbapi_connection)

    # A transaction that ends without either (its connection invalidated, closed, or reset on
    # return to the pool) opens the gate too.
    def _on_end(dbapi_connection: Any, *_args: Any) -> None:
        gate.leave(dbapi_connection)

    for name in ("reset", "checkin", "invalidate", "soft_invalidate", "close"):
        event.listen(engine.pool, name, _on_end)

    return engine
