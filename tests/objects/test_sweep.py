"""Objects without a journal row: a halting step removes its own, the periodic sweep the rest,
and nothing outside the object folders is ever touched."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sqlalchemy import Engine, select

from conveyor.audio.intake import accept_audio
from conveyor.config import Settings
from conveyor.db.tables import audio_records
from conveyor.objects import LocalStore, Sweeper, put_file_row, sweep_orphans
from conveyor.pipeline import Executor
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock


def aged(store: LocalStore, key: str, seconds: float) -> None:
    path = store.path(key)
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_the_sweep_removes_old_objects_without_a_row_and_nothing_else(
    engine: Engine, tmp_path: Path
) -> None:
    store = LocalStore(tmp_path / "data")
    for key in (
        "uploads/audio/orphan",
        "uploads/audio/young",
        "uploads/audio/kept",
        "audio/3/normalized.wav",
        "media/4/.work/poster.jpg",
        "media/4/.thumb.webp.abc.part",
    ):
        store.put_stream(key, [b"x" * 10])
        aged(store, key, 7200)
    aged(store, "uploads/audio/young", 10)
    for outside in ("conveyor.db", "recognizer/job-1/audio.wav"):
        path = store.root / outside
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"keep me")
        os.utime(path, (0, 0))
    with engine.begin() as conn:
        put_file_row(conn, key="uploads/audio/kept", mime_type="audio/wav", size=10, now=1.0)
    dry = sweep_orphans(engine, store, grace=3600, now=time.time(), dry_run=True)
    assert len(dry.removed) == 4 and store.exists("uploads/audio/orphan")
    report = sweep_orphans(engine, store, grace=3600, now=time.time())
    assert sorted(report.removed) == [
        "audio/3/normalized.wav",
        "media/4/.thumb.webp.abc.part",
        "media/4/.work/poster.jpg",
        "uploads/audio/orphan",
    ]
    assert report.removed_bytes == 40
    assert sorted(o.key for o in store.list()) == [
        "conveyor.db",
        "recognizer/job-1/audio.wav",
        "uploads/audio/kept",
        "uploads/audio/young",
    ]


def test_the_sweeper_runs_periodically(engine: Engine, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "data")
    store.put_stream("uploads/media/orphan", [b"x"])
    sweeper = Sweeper(engine, store, interval=0.05, grace=0.0)
    sweeper.start()
    try:
        deadline = time.monotonic() + 20
        while store.exists("uploads/media/orphan"):
            assert time.monotonic() < deadline, "the sweeper never swept"
            time.sleep(0.05)
    finally:
        sweeper.stop()


def test_a_step_that_halts_after_storing_removes_what_it_stored(
    engine: Engine, tmp_path: Path
) -> None:
    # 50 samples of "raw PCM" (3 ms): normalize writes normalized.wav, then halts empty_audio.
    clock = FakeClock()
    runtime = Runtime(Settings(storage={"root": tmp_path / "data"}), clock, engine=engine)
    record_id = accept_audio(
        engine, runtime.store, clock, [bytes(range(100))], owner="alice", raw_pcm=True
    )
    executor = Executor(engine, clock, runtime.settings.pipeline)
    assert executor.run_once(runtime.audio, "audio")
    with engine.connect() as conn:
        row = conn.execute(select(audio_records).where(audio_records.c.id == record_id)).one()
    assert row.halt_reason == "empty_audio"
    assert [o.key for o in runtime.store.list()] == [
        o.key for o in runtime.store.list("uploads")
    ], "only the original is left"
