"""D17: every time the engine, an intake or a step writes is the database's, not the worker's.

A worker host whose clock is five minutes ahead or behind (``OffsetClock``) takes a recording
and a photo album through intake and every step on the database's real clock: the records'
own times (the claim order's sort value among them), the journal, the attempt rows, the files'
journal, the texts and the album's events all carry the database's time. A step's decision
that compares its own time with a stored one (how long a provider has been working) is
therefore made on one clock too.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, Table, select

from conveyor.audio.intake import accept_audio
from conveyor.config import Settings
from conveyor.db.now import db_now
from conveyor.db.tables import (
    album_events,
    audio_records,
    files,
    media_items,
    recognition_attempts,
    record_events,
    texts,
)
from conveyor.media.albums import create_album
from conveyor.media.deletion import delete_item
from conveyor.media.intake import accept_media
from conveyor.runtime import Runtime
from conveyor.testing import FakeProvider, OffsetClock

FIVE_MINUTES = 300.0
# Every time written must lie within the test's span of database time, give or take this much
# (far below the worker's five minutes off).
SLACK = 5.0
TIMES: dict[Table, tuple[str, ...]] = {
    audio_records: ("created_at", "state_entered_at", "updated_at"),
    media_items: ("uploaded_at", "state_entered_at", "updated_at", "halted_at"),
    files: ("created_at",),
    recognition_attempts: ("created_at", "finished_at"),
    texts: ("created_at",),
    record_events: ("created_at",),
    album_events: ("created_at",),
}


def database_time(engine: Engine) -> float:
    with engine.connect() as conn:
        return float(conn.execute(select(db_now())).scalar_one())


def settle(runtime: Runtime, deadline: float) -> None:
    """Run every lane's steps on this thread until nothing is left to do."""
    executor = runtime.pool({}).executor
    domains = runtime.domains()
    idle_rounds = 0
    while idle_rounds < 10:  # postpones (0.1 s) and retry pauses pass between rounds
        assert time.monotonic() < deadline, "records did not settle in time"
        worked = False
        for domain in domains:
            for lane in domain.lanes:
                while executor.run_once(domain, lane):
                    worked = True
        idle_rounds = 0 if worked else idle_rounds + 1
        if not worked:
            time.sleep(0.05)


@pytest.mark.parametrize("offset", [+FIVE_MINUTES, -FIVE_MINUTES], ids=["ahead", "behind"])
def test_d17_rows_written_by_intake_and_steps_carry_the_database_time(
    engine: Engine, tmp_path: Path, corpus: Path, offset: float
) -> None:
    settings = Settings(
        storage={"root": tmp_path / "data"},  # type: ignore[arg-type]
        pipeline={"workers": 0, "poll_interval": 0.05, "retry_base": 0.05, "retry_max": 0.1},  # type: ignore[arg-type]
    )
    # The asynchronous fake provider: a submit, a "running" poll, then the answer, so the
    # attempt row is written, finished and its raw response journalled.
    runtime = Runtime(settings, OffsetClock(offset), engine=engine, provider=FakeProvider())
    before = database_time(engine)
    record = accept_audio(
        engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "jfk.wav",
        owner="ann",
        hints="Americans",
        keep_duplicate=True,
    )
    album = create_album(engine, runtime.clock, owner="ann", name="trip")
    media = corpus / "media"
    photo, broken, gone = (
        accept_media(
            engine,
            runtime.store,
            runtime.clock,
            media / name,
            album_id=album,
            owner="ann",
            max_pixels=settings.media.max_pixels,
            keep_duplicate=True,
        )
        for name in (
            "exif-samples__DSCN0010.jpg",
            "pillow__truncated_jpeg.jpg",
            "exif-samples__Canon_40D.jpg",
        )
    )
    assert delete_item(engine, runtime.store, runtime.clock, gone)
    settle(runtime, time.monotonic() + 120)
    after = database_time(engine)

    with engine.connect() as conn:
        assert conn.execute(
            select(audio_records.c.stage).where(audio_records.c.id == record)
        ).one()[0] == ("done")
        assert conn.execute(
            select(media_items.c.stage, media_items.c.halt_reason)
            .where(media_items.c.id.in_([photo, broken]))
            .order_by(media_items.c.id)
        ).all() == [("done", None), ("uploaded", "undecodable")]
        kinds = {
            str(k) for k in conn.execute(select(album_events.c.kind)).scalars()
        }  # the steps' events, the halt's and the deletion's
        assert {"item.halted", "item.deleted"} <= kinds and len(kinds) >= 3
        counted = 0
        wrong: list[str] = []
        for table, columns in TIMES.items():
            rows = conn.execute(select(table.c.id, *(table.c[c] for c in columns))).all()
            assert rows, f"no {table.name} rows were written"
            for row in rows:
                for column, value in zip(columns, row[1:], strict=True):
                    if value is None:
                        continue
                    counted += 1
                    if not before - SLACK <= float(value) <= after + SLACK:
                        wrong.append(f"{table.name}.{column} of {row[0]}: {value - after:+.0f} s")
    assert wrong == []
    # Intake (record, file, hints text, journal), four steps and the photo's writes at least.
    assert counted >= 30
