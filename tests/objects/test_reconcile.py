"""``check_storage``: the journal against the store on both databases and both kinds of store —
missing objects, size mismatches, orphans (old enough), recent objects apart; nothing changed."""

from __future__ import annotations

import time

from sqlalchemy import Engine

from conveyor.objects import ObjectStore, Sweeper, put_file_row
from conveyor.objects.reconcile import Mismatch, check_storage
from conveyor.objects.sweep import FIRST_SWEEP


def test_check_finds_missing_objects_size_mismatches_and_orphans(
    engine: Engine, object_store: ObjectStore
) -> None:
    for key, body in (
        ("uploads/audio/fine", b"x" * 10),
        ("audio/3/normalized.wav", b"x" * 7),  # the journal says 10
        ("media/4/thumb-abc.webp", b"x" * 5),  # no row: an orphan once old enough
        ("recognizer/job-1/audio.wav", b"x"),  # outside the journalled prefixes
    ):
        object_store.put(key, [body])
    with engine.begin() as conn:
        for key in ("uploads/audio/fine", "audio/3/normalized.wav", "uploads/media/gone"):
            put_file_row(conn, key=key, mime_type="application/octet-stream", size=10, now=1.0)
    now = time.time()
    young = check_storage(engine, object_store, grace=3600, now=now)
    assert young.missing == ["uploads/media/gone"]
    assert young.mismatched == [Mismatch("audio/3/normalized.wav", 10, 7)]
    assert young.orphans == [] and young.recent == 1
    assert (young.journaled, young.stored) == (3, 3)
    old = check_storage(engine, object_store, grace=3600, now=now + 7200)
    assert old.orphans == ["media/4/thumb-abc.webp"] and old.orphan_bytes == 5
    assert old.recent == 0 and not old.agrees
    assert object_store.exists("media/4/thumb-abc.webp"), "a check changes nothing"


def test_an_empty_journal_and_store_agree(engine: Engine, object_store: ObjectStore) -> None:
    report = check_storage(engine, object_store, grace=0, now=time.time())
    assert report.agrees and report.journaled == report.stored == 0


def test_the_first_sweep_comes_soon_after_start(engine: Engine, object_store: ObjectStore) -> None:
    assert Sweeper(engine, object_store, interval=3600, grace=3600).first == FIRST_SWEEP
    assert Sweeper(engine, object_store, interval=5, grace=3600).first == 5
    object_store.put("uploads/media/orphan", [b"x"])
    sweeper = Sweeper(engine, object_store, interval=3600, grace=0.0, first=0.05)
    sweeper.start()
    try:
        deadline = time.monotonic() + 20
        while object_store.exists("uploads/media/orphan"):
            assert time.monotonic() < deadline, "the first sweep did not come before the interval"
            time.sleep(0.05)
    finally:
        sweeper.stop()
