"""A database at an older schema revision, for the upgrade tests of each new revision."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, Row, insert, select, text

from conveyor.audio.stages import AUDIO
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import albums, audio_records, files, media_items, texts, users
from conveyor.media.stages import MEDIA

__all__ = [
    "AUDIO_ADDED",
    "AUDIO_COLUMNS",
    "AUDIO_STAGES",
    "MEDIA_ADDED",
    "MEDIA_COLUMNS",
    "MEDIA_STAGES",
    "NOW",
    "Kept",
    "assert_kept",
    "database_at",
    "fill_every_stage",
    "fill_for_alice",
]

#: The time the filled rows are dated with.
NOW = 1_800_000_000.0

#: The stages the filled records stand in: audio (the last one again, halted) and media.
AUDIO_STAGES = list(AUDIO.stage_names)
MEDIA_STAGES = list(MEDIA.stage_names)


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


def fill_every_stage(conn: Connection, now: float, *, owner: str) -> None:
    """Insert one audio record in each of ``AUDIO_STAGES`` plus a halted one (id 6, ``stuck``),
    a transcript of record 5 ("hello"), album 1 and one media item in each of ``MEDIA_STAGES``,
    all owned by ``owner``, using only columns every revision since 0003 has."""
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


#: ``media_items`` columns later revisions add (0011 ``step_started_at``; 0012 the capture zone
#: and the incomplete flag; 0013 ``claimed_by``; 0014 ``added_by``; 0015 ``content_id``): the
#: upgrade tests of earlier revisions read the others.
MEDIA_ADDED = frozenset(
    {"step_started_at", "captured_offset", "incomplete", "claimed_by", "added_by", "content_id"}
)
#: ``audio_records`` columns later revisions add (0011 ``step_started_at``, 0013 ``claimed_by``).
AUDIO_ADDED = frozenset({"step_started_at", "claimed_by"})

#: The record columns every revision the upgrade tests start from knows.
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in AUDIO_ADDED]
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


@dataclass(frozen=True)
class Kept:
    """The records of an old database before its upgrade (the columns it knows)."""

    audio: Sequence[Row[Any]]
    media: Sequence[Row[Any]]


def fill_for_alice(conn: Connection, now: float = NOW) -> Kept:
    """User ``alice`` (id 1) and :func:`fill_every_stage` of hers; returns what was written."""
    conn.execute(insert(users).values(id=1, name="alice", created_at=now))
    fill_every_stage(conn, now, owner="alice")
    return read_kept(conn)


def read_kept(conn: Connection) -> Kept:
    """The records as they stand, in the columns every old revision knows."""
    return Kept(
        audio=conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all(),
        media=conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all(),
    )


def assert_kept(engine: Engine, before: Kept) -> None:
    """Every record of ``before`` is still there, unchanged, each in its stage."""
    with engine.connect() as conn:
        after = read_kept(conn)
    assert after.audio == before.audio
    assert [r.stage for r in after.audio] == [*AUDIO_STAGES, "submitted"]
    assert after.media == before.media
    assert [r.stage for r in after.media] == MEDIA_STAGES
