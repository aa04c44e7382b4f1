"""A database at an older schema revision, for the upgrade tests of each new revision."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade

__all__ = ["database_at"]


def database_at(revision: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """Yield an engine whose schema stands at ``revision``, on ``request.param`` ("sqlite" or
    "postgresql"). SQLite is a new file; PostgreSQL is the test database's public schema,
    rebuilt at ``revision`` and rebuilt again at the head afterwards for the tests that follow.
    """
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
        upgrade(engine, revision)
        yield engine
        engine.dispose()
        return
    engine = request.getfixturevalue("pg_engine")
    _empty(engine)
    upgrade(engine, revision)
    try:
        yield engine
    finally:
        _empty(engine)
        upgrade(engine)


def _empty(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
