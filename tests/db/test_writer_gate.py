"""SQLite: the threads of one process queue for the write lock on an in-process gate instead of
polling SQLite's lock with sleeps (its busy handler). SQLite only: PostgreSQL has no such lock.

Every connection here has SQLite's busy timeout at 0, so a writer that met SQLite's lock taken
would fail at once with "database is locked": one that succeeds waited on the gate.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import OperationalError

from conveyor.db.engine import make_engine


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'gate.db'}")

    @event.listens_for(engine, "connect")
    def _no_busy_wait(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout = 0")

    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (n INTEGER)"))
    yield engine
    engine.dispose()


def write_in_thread(engine: Engine, n: int) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def write() -> None:
        try:
            with engine.begin() as conn:
                conn.execute(text("INSERT INTO t VALUES (:n)"), {"n": n})
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    return thread, errors


def count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM t")).scalar_one())


def test_a_writer_waits_for_another_threads_transaction_on_the_gate(sqlite: Engine) -> None:
    with sqlite.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
        thread, errors = write_in_thread(sqlite, 2)
        thread.join(0.2)  # it waits for the gate, not in SQLite's lock
        assert thread.is_alive() and not errors
    thread.join(30)
    assert not thread.is_alive() and errors == []
    assert count(sqlite) == 2


def test_a_failed_or_rolled_back_transaction_opens_the_gate(sqlite: Engine) -> None:
    with pytest.raises(OperationalError), sqlite.begin() as conn:
        conn.execute(text("INSERT INTO missing VALUES (1)"))
    with sqlite.connect() as conn, conn.begin() as tx:
        conn.execute(text("INSERT INTO t VALUES (1)"))
        tx.rollback()
    with sqlite.connect() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))  # autobegun, closed without a commit
    thread, errors = write_in_thread(sqlite, 2)
    thread.join(30)
    assert not thread.is_alive() and errors == []
    assert count(sqlite) == 1


def test_a_second_transaction_in_the_same_thread_gets_sqlites_answer_not_a_hang(
    sqlite: Engine,
) -> None:
    """A thread that holds the gate and opens a transaction on a second connection passes the
    gate and meets SQLite's own lock: "database is locked" (here at once), as without a gate."""
    with sqlite.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
        with (
            pytest.raises((OperationalError, sqlite3.OperationalError), match="locked"),
            sqlite.begin() as other,
        ):
            other.execute(text("INSERT INTO t VALUES (2)"))
    assert count(sqlite) == 1


def test_engines_of_one_file_share_its_gate(sqlite: Engine) -> None:
    second = make_engine(str(sqlite.url))

    @event.listens_for(second, "connect")
    def _no_busy_wait(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout = 0")

    try:
        with sqlite.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (1)"))
            thread, errors = write_in_thread(second, 2)
            thread.join(0.2)
            assert thread.is_alive() and not errors
        thread.join(30)
        assert errors == [] and count(sqlite) == 2
    finally:
        second.dispose()
