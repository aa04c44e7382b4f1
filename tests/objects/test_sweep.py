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
from conveyor.objects import LocalStore, ObjectStore, Sweeper, put_file_row, sweep_orphans
from conveyor.pipeline import Executor
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock


def test_the_sweep_removes_old_objects_without_a_row_and_nothing_else(
    engine: Engine, object_store: ObjectStore
) -> None:
    """M1 on both kinds of store: objects no journal row names, older than the grace, go;
    young ones, journalled ones and anything outside the object prefixes stay."""
    for key in (
        "uploads/audio/orphan",
        "uploads/audio/kept",
        "audio/3/normalized.wav",
        "media/4/thumb-abc.webp",
        "recognizer/job-1/audio.wav",
    ):
        object_store.put(key, [b"x" * 10])
    with engine.begin() as conn:
        put_file_row(conn, key="uploads/audio/kept", mime_type="audio/wav", size=10, now=1.0)
    later = time.time() + 7200
    young = sweep_orphans(engine, object_store, grace=3600, now=time.time())
    assert young.removed == [], "everything is younger than the grace"
    dry = sweep_orphans(engine, object_store, grace=3600, now=later, dry_run=True)
    assert len(dry.removed) == 3 and object_store.exists("uploads/audio/orphan")
    report = sweep_orphans(engine, object_store, grace=3600, now=later)
    assert sorted(report.removed) == [
        "audio/3/normalized.wav",
        "media/4/thumb-abc.webp",
        "uploads/audio/orphan",
    ]
    assert report.removed_bytes == 30
    assert sorted(o.key for o in object_store.list()) == [
        "recognizer/job-1/audio.wav",
        "uploads/audio/kept",
    ]


def test_the_sweep_leaves_the_folder_s_other_files(engine: Engine, tmp_path: Path) -> None:
    """The embedded database and the recognizer's files share the folder: never swept."""
    store = LocalStore(tmp_path / "data")
    for outside in ("conveyor.db", "recognizer/job-1/audio.wav"):
        path = store.root / outside
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"keep me")
        os.utime(path, (0, 0))
    report = sweep_orphans(engine, store, grace=3600, now=time.time())
    assert report.removed == []
    assert (store.root / "conveyor.db").read_bytes() == b"keep me"


def test_the_sweeper_runs_periodically(engine: Engine, object_store: ObjectStore) -> None:
    store = object_store
    store.put("uploads/media/orphan", [b"x"])
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
    runtime = Runtime(Settings(storage={"root": tmp_path / "data"}), clock, engine=engine)  # type: ignore[arg-type]
    record_id = accept_audio(
        engine,
        runtime.store,
        clock,
        [bytes(range(100))],
        owner="alice",
        raw_pcm=True,
        keep_duplicate=True,
    )
    executor = Executor(engine, clock, runtime.settings.pipeline)
    assert executor.run_once(runtime.audio, "audio")
    with engine.connect() as conn:
        row = conn.execute(select(audio_records).where(audio_records.c.id == record_id)).one()
    assert row.halt_reason == "empty_audio"
    assert [o.key for o in runtime.store.list()] == [
        o.key for o in runtime.store.list("uploads")
    ], "only the original is left"
