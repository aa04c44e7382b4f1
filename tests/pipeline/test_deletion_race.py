"""Deletion raced against steps in flight, on SQLite and PostgreSQL (P6 applied to deletion).

A step is held mid-way by a barrier around the real step; the record (or item, or album) is
deleted; then the step goes on. Its claim must write nothing afterwards — no transcript, no
journal row, no role, no ``item.ready`` — and the objects it stored after the deletion must be
gone too. Then the same race without a barrier, many times, under a running worker pool.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from conveyor.audio.deletion import delete_record
from conveyor.audio.intake import accept_audio
from conveyor.config import Settings
from conveyor.db.engine import is_postgresql
from conveyor.db.tables import (
    album_events,
    audio_records,
    files,
    media_items,
    media_objects,
    record_events,
)
from conveyor.media.albums import create_album
from conveyor.media.deletion import delete_album, delete_item
from conveyor.media.domain import SHORT_LANE
from conveyor.media.intake import accept_media
from conveyor.pipeline import Domain, Executor, StepContext
from conveyor.runtime import Runtime

AUDIO = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "audio"
MEDIA = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media"


def runtime_for(engine: Engine, tmp_path: Path) -> Runtime:
    settings = Settings(
        storage={"root": tmp_path / "data"},  # type: ignore[arg-type]
        pipeline={"workers": 0, "poll_interval": 0.05, "retry_base": 0.05, "retry_max": 0.1},  # type: ignore[arg-type]
        media={"short_workers": 0, "long_workers": 0},  # type: ignore[arg-type]
    )
    return Runtime(settings, engine=engine)


def stored(runtime: Runtime) -> list[str]:
    return sorted(o.key for o in runtime.store.list())


def count(engine: Engine, table: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def with_barrier(domain: Domain, stage: str) -> tuple[Domain, threading.Event, threading.Event]:
    """``domain`` whose step at ``stage`` waits for ``go`` after saying ``entered``."""
    entered, go = threading.Event(), threading.Event()
    stages = []
    for s in domain.stages:
        if s.name == stage:
            real = s.step
            assert real is not None

            def held(ctx: StepContext, real: Callable[[StepContext], Any] = real) -> Any:
                entered.set()
                assert go.wait(30)
                return real(ctx)

            s = replace(s, step=held)
        stages.append(s)
    return replace(domain, stages=stages), entered, go


def race(executor: Executor, domain: Domain, lane: str, delete: Callable[[], object]) -> None:
    held, entered, go = with_barrier(domain, domain.lane_stages(lane)[0].name)
    worker = threading.Thread(target=executor.run_once, args=(held, lane))
    worker.start()
    assert entered.wait(30), "the step never started"
    delete()
    go.set()
    worker.join(60)
    assert not worker.is_alive()


def test_p6_a_record_deleted_during_normalize_gets_nothing_written_afterwards(
    engine: Engine, tmp_path: Path
) -> None:
    runtime = runtime_for(engine, tmp_path)
    record_id = accept_audio(
        engine, runtime.store, runtime.clock, AUDIO / "jfk.wav", owner="alice", keep_duplicate=True
    )
    executor = Executor(engine, runtime.clock, runtime.settings.pipeline)
    deleted: list[bool] = []
    race(
        executor,
        runtime.audio,
        "audio",
        lambda: deleted.append(
            delete_record(engine, runtime.store, runtime.clock, record_id, owner="alice")
        ),
    )
    assert deleted == [True]
    assert count(engine, audio_records) == 0
    assert count(engine, files) == 0
    assert stored(runtime) == []  # normalized.wav, written after the deletion, is gone too
    with engine.connect() as conn:
        outcomes = [r.outcome for r in conn.execute(select(record_events.c.outcome))]
    assert outcomes == []  # the journal goes with the record
    # Idempotent: a second deletion finds nothing and changes nothing.
    assert delete_record(engine, runtime.store, runtime.clock, record_id) is False


def test_p6_an_item_deleted_during_its_variants_step_gets_no_role_and_no_event(
    engine: Engine, tmp_path: Path
) -> None:
    runtime = runtime_for(engine, tmp_path)
    album_id = create_album(engine, runtime.clock, owner="alice", name="a")
    photo = MEDIA / "exif-samples__Canon_40D.jpg"
    item_id = accept_media(
        engine,
        runtime.store,
        runtime.clock,
        photo,
        album_id=album_id,
        owner="alice",
        max_pixels=10**8,
        keep_duplicate=True,
    )
    other = accept_media(
        engine,
        runtime.store,
        runtime.clock,
        photo,
        album_id=album_id,
        owner="alice",
        max_pixels=10**8,
        keep_duplicate=True,
    )
    executor = Executor(engine, runtime.clock, runtime.settings.pipeline)
    # Newest first (M6): the step holds `other`; delete it while it runs.
    race(
        executor,
        runtime.media,
        SHORT_LANE,
        lambda: delete_item(engine, runtime.store, runtime.clock, other, owner="alice"),
    )
    with engine.connect() as conn:
        assert conn.execute(select(media_items.c.id)).scalars().all() == [item_id]
        roles = conn.execute(select(media_objects.c.item_id)).scalars().all()
        kinds = [
            (r.item_id, r.kind)
            for r in conn.execute(select(album_events).order_by(album_events.c.id))
        ]
    assert set(roles) == {item_id}
    assert kinds == [(other, "item.deleted")]
    assert [k for k in stored(runtime) if f"media/{other}/" in k] == []
    assert count(engine, files) == 1  # the remaining item's original
    assert delete_item(engine, runtime.store, runtime.clock, other) is False


def test_p6_an_album_deleted_during_a_step_takes_everything_with_it(
    engine: Engine, tmp_path: Path
) -> None:
    runtime = runtime_for(engine, tmp_path)
    album_id = create_album(engine, runtime.clock, owner="alice", name="a")
    photo = MEDIA / "exif-samples__Canon_40D.jpg"
    for _ in range(2):
        accept_media(
            engine,
            runtime.store,
            runtime.clock,
            photo,
            album_id=album_id,
            owner="alice",
            max_pixels=10**8,
            keep_duplicate=True,
        )
    executor = Executor(engine, runtime.clock, runtime.settings.pipeline)
    executor.run_once(runtime.media, SHORT_LANE)  # one item done, with its variants
    counts: list[int | None] = []
    race(
        executor,
        runtime.media,
        SHORT_LANE,
        lambda: counts.append(
            delete_album(engine, runtime.store, runtime.clock, album_id, owner="alice")
        ),
    )
    assert counts == [2]
    for table in (media_items, media_objects, album_events, files):
        assert count(engine, table) == 0, table.name
    assert stored(runtime) == []
    assert delete_album(engine, runtime.store, runtime.clock, album_id) is None


@pytest.mark.parametrize("rounds", [12])
def test_p6_deleting_items_under_a_running_pool_leaves_no_trace(
    engine: Engine, tmp_path: Path, rounds: int
) -> None:
    runtime = runtime_for(engine, tmp_path)
    album_id = create_album(engine, runtime.clock, owner="alice", name="a")
    pool = runtime.pool({"audio": 0, SHORT_LANE: 2, "long": 0})
    photo = MEDIA / "exif-samples__Canon_40D.jpg"
    pool.start()
    try:
        for index in range(rounds):
            item_id = accept_media(
                engine,
                runtime.store,
                runtime.clock,
                photo,
                album_id=album_id,
                owner="alice",
                max_pixels=10**8,
                keep_duplicate=True,
            )
            runtime.notifier.publish()
            time.sleep(0.02 * (index % 5))  # before, during or after the variants step
            assert delete_item(engine, runtime.store, runtime.clock, item_id)
    finally:
        pool.stop()
    for table in (media_items, media_objects, files):
        assert count(engine, table) == 0, table.name
    with engine.connect() as conn:
        kinds = set(conn.execute(select(album_events.c.kind)).scalars())
        ready = (
            conn.execute(select(album_events.c.item_id).where(album_events.c.kind == "item.ready"))
            .scalars()
            .all()
        )
        gone = (
            conn.execute(
                select(album_events.c.item_id).where(album_events.c.kind == "item.deleted")
            )
            .scalars()
            .all()
        )
    assert kinds <= {"item.ready", "item.deleted"}
    assert len(gone) == rounds
    assert stored(runtime) == []
    if not is_postgresql(engine):
        return  # the embedded SQLite database reuses the newest deleted id: no ordering check
    # An item.ready, if any, always comes before its item's deletion, never after.
    with engine.connect() as conn:
        rows = conn.execute(select(album_events).order_by(album_events.c.id)).all()
    seen_deleted: set[int] = set()
    for row in rows:
        if row.kind == "item.deleted":
            seen_deleted.add(row.item_id)
        else:
            assert row.item_id not in seen_deleted, "an event after the deletion"
    assert set(ready) <= set(gone)
    assert stored(runtime) == []
