"""A database at an older schema revision, for the upgrade tests of each new revision.

An upgrade test fills the old database, reads what it wrote in the columns of the old revision
(:func:`read_kept`, :func:`columns_at`), upgrades and reads the same columns again
(:func:`assert_kept`). Which columns a revision has is reflected from a database just upgraded
to it, never listed by hand: a later revision that adds a column breaks no earlier test.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Connection, Engine, Row, Table, insert, inspect, select, text

from conveyor.audio.stages import AUDIO
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import albums, audio_records, files, media_items, metadata, texts, users
from conveyor.media.stages import MEDIA

__all__ = [
    "AUDIO_STAGES",
    "MEDIA_STAGES",
    "NOW",
    "Kept",
    "assert_kept",
    "columns_at",
    "database_at",
    "fill_every_stage",
    "fill_for_alice",
    "read_at",
    "read_kept",
]

#: The time the filled rows are dated with.
NOW = 1_800_000_000.0

#: The stages the filled records stand in: audio (the last one again, halted) and media.
AUDIO_STAGES = list(AUDIO.stage_names)
MEDIA_STAGES = list(MEDIA.stage_names)


def _reflect(engine: Engine) -> dict[str, frozenset[str]]:
    """The column names of ``engine``'s tables that the current metadata names, by table."""
    inspector = inspect(engine)
    present = set(inspector.get_table_names()) & set(metadata.tables)
    return {t: frozenset(str(c["name"]) for c in inspector.get_columns(t)) for t in present}


@cache
def _columns_by_table(revision: str) -> dict[str, frozenset[str]]:
    """The column names at ``revision``, by table, reflected from a scratch SQLite database
    right after ``alembic upgrade revision`` (about 1 s; once per revision and test process)."""
    with tempfile.TemporaryDirectory() as scratch:
        engine = make_engine(f"sqlite:///{Path(scratch) / 'at.db'}")
        try:
            upgrade(engine, revision)
            return _reflect(engine)
        finally:
            engine.dispose()


def columns_at(revision: str, table: Table) -> list[Column[Any]]:
    """The columns of ``table`` (its :mod:`conveyor.db.tables` columns, in their order) that the
    schema at ``revision`` has; a column a later revision dropped or renamed is none of them.
    Raises KeyError when ``table`` is not there at ``revision``."""
    names = _columns_by_table(revision)[table.name]
    return [c for c in table.c if c.name in names]


def database_at(revision: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """Yield an engine whose schema stands at ``revision``, on ``request.param`` ("sqlite" or
    "postgresql"). SQLite is a new file; PostgreSQL is the test database's public schema,
    rebuilt at ``revision`` and rebuilt again at the head afterwards for the tests that follow.
    The database's columns are :func:`columns_at` ``revision`` (checked: both dialects).
    """
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
        upgrade(engine, revision)
        _check_columns(engine, revision)
        yield engine
        engine.dispose()
        return
    engine = request.getfixturevalue("pg_engine")
    _empty(engine)
    upgrade(engine, revision)
    try:
        _check_columns(engine, revision)
        yield engine
    finally:
        _empty(engine)
        upgrade(engine)


def _check_columns(engine: Engine, revision: str) -> None:
    # The columns are reflected from SQLite; a revision that added a column on one dialect
    # only would make the upgrade tests compare the wrong ones on the other.
    assert _reflect(engine) == _columns_by_table(revision), (
        f"{engine.dialect.name} at {revision} has other columns than SQLite at {revision}"
    )


def _empty(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))


def fill_every_stage(conn: Connection, now: float, *, owner: str) -> None:
    """Insert one audio record in each of ``AUDIO_STAGES`` plus a halted one (id 6, ``stuck``),
    a transcript of record 5 ("hello"), album 1 and one media item in each of ``MEDIA_STAGES``,
    all owned by ``owner``, using only columns every revision since 0002 has."""
    queue = {"state_entered_at": now, "attempts": 0, "updated_at": now}
    conn.execute(
        insert(files).values(
            id=1, key="u/1", mime_type="audio/wav", size=10, state="stored", created_at=now
        )
    )
    for n, stage in enumerate([*AUDIO_STAGES, "submitted"], 1):
        halted = {"halted_at": now, "halt_reason": "stuck"} if n == 6 else {}
        conn.execute(
            insert(audio_records).values(
                id=n,
                owner=owner,
                title=f"t{n}",
                created_at=now + n,
                original_file_id=1,
                stage=stage,
                **queue,
                **halted,
            )
        )
    conn.execute(insert(texts).values(record_id=5, kind="transcript", body="hello", created_at=now))
    conn.execute(insert(albums).values(id=1, owner=owner, name="Trip", created_at=now))
    for n, stage in enumerate(MEDIA_STAGES, 1):
        conn.execute(
            insert(media_items).values(
                id=n,
                owner=owner,
                album_id=1,
                kind="photo",
                uploaded_at=now,
                stage=stage,
                **queue,
            )
        )


@dataclass(frozen=True)
class Kept:
    """The rows of an old database before its upgrade: each table's rows in primary-key order,
    in the columns ``revision`` has (:func:`read_kept`)."""

    revision: str
    rows: Mapping[str, Sequence[Row[Any]]]

    @property
    def audio(self) -> Sequence[Row[Any]]:
        """The ``audio_records`` rows."""
        return self.rows[audio_records.name]

    @property
    def media(self) -> Sequence[Row[Any]]:
        """The ``media_items`` rows."""
        return self.rows[media_items.name]


def read_at(conn: Connection, table: Table, revision: str) -> list[Row[Any]]:
    """The rows of ``table`` in primary-key order, in the columns of :func:`columns_at`
    ``revision`` (so the same read before and after an upgrade compares like with like)."""
    query = select(*columns_at(revision, table)).order_by(*table.primary_key)
    return list(conn.execute(query))


def _revision_of(conn: Connection) -> str:
    revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
    return str(revision)


def read_kept(conn: Connection, *more: Table, revision: str | None = None) -> Kept:
    """``audio_records``, ``media_items`` and the tables ``more`` as they stand, in the columns
    of ``revision`` (default: the revision the database is at)."""
    at = revision or _revision_of(conn)
    tables = (audio_records, media_items, *more)
    return Kept(revision=at, rows={t.name: read_at(conn, t, at) for t in tables})


def fill_for_alice(conn: Connection, *more: Table, now: float = NOW) -> Kept:
    """User ``alice`` (id 1) and :func:`fill_every_stage` of hers; returns what was written
    (:func:`read_kept` of the records, the items and ``more``)."""
    conn.execute(insert(users).values(id=1, name="alice", created_at=now))
    fill_every_stage(conn, now, owner="alice")
    return read_kept(conn, *more)


def assert_kept(engine: Engine, before: Kept) -> None:
    """Every row of ``before`` is still there, unchanged in the columns it was read in, and
    every record and item in its stage."""
    with engine.connect() as conn:
        after = {
            name: read_at(conn, metadata.tables[name], before.revision) for name in before.rows
        }
    for name, rows in before.rows.items():
        assert after[name] == rows, f"{name} changed in the upgrade from {before.revision}"
    assert [r.stage for r in before.audio] == [*AUDIO_STAGES, "submitted"]
    assert [r.stage for r in before.media] == MEDIA_STAGES
