"""Counting a database's round trips at the driver, per phase of the work (claim, step, save).

A round trip is a wait for the server's answer: each statement sent (an ``executemany`` is one:
psycopg pipelines it), plus each ``BEGIN``, ``COMMIT`` and ``ROLLBACK`` that reaches the server.
psycopg sends ``BEGIN`` just before a transaction's first statement and nothing at all for a
transaction that ran none, or for a connection in autocommit; SQLite's engine begins every
transaction with its own ``BEGIN IMMEDIATE``, autocommit or not, and ends each: all counted.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, event

__all__ = ["RoundTrips"]


class RoundTrips:
    """Counts the round trips ``engine`` makes, under the name of the phase now running.

    Use :meth:`phase` around each part of the work; :attr:`counts` maps a phase to its round
    trips and :attr:`statements` to the statements' first words (for a readable failure).
    Threads share the current phase: run the phases one after another.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.counts: Counter[str] = Counter()
        self.statements: dict[str, list[str]] = {}
        self._phase = "other"
        self._lock = threading.Lock()
        self._open: set[int] = set()  # connections whose transaction has sent a statement
        self._postgresql = engine.dialect.name == "postgresql"
        self._hooks: list[tuple[str, Callable[..., None]]] = [
            ("before_cursor_execute", self._statement),
            ("begin", self._begin),
            ("commit", self._end),
            ("rollback", self._end),
        ]
        for name, hook in self._hooks:
            event.listen(engine, name, hook)

    def close(self) -> None:
        """Stop counting."""
        for name, hook in self._hooks:
            event.remove(self.engine, name, hook)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count what runs inside the block under ``name``."""
        self._phase = name
        try:
            yield
        finally:
            self._phase = "other"

    @property
    def current(self) -> str:
        """The phase now running (``other`` outside any)."""
        return self._phase

    def report(self) -> str:
        """Each phase's count and statements, one phase a line."""
        return "\n".join(
            f"{phase}: {count}: {' | '.join(self.statements[phase])}"
            for phase, count in self.counts.items()
        )

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[self._phase] += 1
            self.statements.setdefault(self._phase, []).append(what)

    def _statement(self, conn: Connection, _cursor: Any, statement: str, *_rest: Any) -> None:
        key = id(conn.connection.dbapi_connection)
        if self._postgresql and not _autocommit(conn) and key not in self._open:
            self._open.add(key)
            self._count("BEGIN")
        self._count(" ".join(statement.split()[:4]))

    def _begin(self, _conn: Connection) -> None:
        if not self._postgresql:
            self._count("BEGIN")

    def _end(self, conn: Connection) -> None:
        if not self._postgresql:
            self._count("END")
            return
        key = id(conn.connection.dbapi_connection)
        if key in self._open:
            self._open.discard(key)
            self._count("END")


def _autocommit(conn: Connection) -> bool:
    return conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
