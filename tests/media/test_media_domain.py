"""The media domain on the engine (NORMS M1-M8), on SQLite and PostgreSQL; real files, no mocks."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import pyvips
from media_helpers import MEDIA, PIPELINE, add, album, drain, make_photo, make_video, media_domain
from sqlalchemy import Engine, func, select, update

from conveyor.clock import SystemClock
from conveyor.config import DatabaseSettings, MediaSettings, Settings
from conveyor.db.tables import album_events, files, media_items, media_objects
from conveyor.media.albums import item_view
from conveyor.media.broadcast import AlbumBroadcast
from conveyor.media.domain import LONG_LANE, SHORT_LANE, MediaSteps, build_media_domain
from conveyor.objects import LocalStore
from conveyor.pipeline import Executor, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media"
PHOTO = CORPUS / "exif-samples__landscape_6.jpg"
VIDEO = CORPUS / "moviepy__fire2.mp4"


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture(scope="module")
def long_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6 s 1080p MPEG-4 video: a few seconds of real transcoding."""
    return make_video(
        tmp_path_factory.mktemp("videos") / "long.mp4", width=1920, height=1080, seconds=6
    )


def stage_of(engine: Engine, item_id: int) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(select(media_items.c.stage).where(media_items.c.id == item_id)).scalar()
        )


def roles_of(engine: Engine, item_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(item_view(conn, item_id)["roles"])


def event_rows(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(album_events).order_by(album_events.c.id)).mappings()
        return [dict(r) for r in rows]


def files_in(store: LocalStore, item_id: int) -> list[str]:
    folder = store.path(f"media/{item_id}")
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


# --------------------------------------------------------------------------- M1-M3


def test_m1_every_object_is_one_journal_row(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    photo = add(engine, store, clock, album_id, PHOTO)
    video = add(engine, store, clock, album_id, VIDEO)
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        journal = conn.execute(select(files)).mappings().all()
        refs = conn.execute(select(media_objects)).mappings().all()
    assert len(journal) == len(refs) == 4 + 6  # photo: 4 roles; video: 6
    assert len({r["key"] for r in journal}) == len(journal)
    by_id = {r["id"]: r for r in journal}
    for item_id in (photo, video):
        for role, obj in roles_of(engine, item_id).items():
            row = by_id[
                next(r["file_id"] for r in refs if (r["item_id"], r["role"]) == (item_id, role))
            ]
            path = store.path(row["key"])
            assert path.stat().st_size == row["size"] == obj["size"], role
            assert row["state"] == "ready"
            assert row["width"] and row["height"], role
    assert roles_of(engine, photo)["original"]["mime_type"] == "image/jpeg"
    assert roles_of(engine, video)["playback"]["duration"] == pytest.approx(2.38, abs=0.1)


def test_m1_mime_type_is_sniffed_not_named(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, CORPUS / "lychee__mongolia")  # no extension
    assert roles_of(engine, item)["original"]["mime_type"] == "image/jpeg"


def test_m2_original_served_before_variants(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, PHOTO)
    with engine.connect() as conn:
        view = item_view(conn, item)
    assert view["stage"] == "uploaded"
    assert set(view["roles"]) == {"original"}
    assert (view["width"], view["height"]) == (600, 450)  # upright from the header already
    original = view["roles"]["original"]
    assert store.path(original["key"]).read_bytes() == PHOTO.read_bytes()  # stored unchanged
    drain(engine, media_domain(store), clock)
    assert set(roles_of(engine, item)) == {"original", "thumb", "medium", "preview"}
    assert stage_of(engine, item) == "done"


def test_m1_photo_header_is_read_once_at_intake_and_once_for_the_decode(
    engine: Engine, store: LocalStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The variants step takes size and capture time from the item intake wrote, not a probe."""
    opened: list[str] = []
    real = pyvips.Image.new_from_file

    def counting(name: str, **kwargs: Any) -> pyvips.Image:
        opened.append(Path(name).name)
        return real(name, **kwargs)

    monkeypatch.setattr(pyvips.Image, "new_from_file", staticmethod(counting))
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, PHOTO)
    assert len(opened) == 1  # intake's header probe
    drain(engine, media_domain(store), clock)
    assert stage_of(engine, item) == "done"
    assert len(opened) == 2  # the variants step's own header check before its one decode
    with engine.connect() as conn:
        view = item_view(conn, item)
    assert (view["width"], view["height"]) == (600, 450)


def test_m3_processed_video_has_poster_and_playback(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, VIDEO)
    domain = media_domain(store)
    drain(engine, domain, clock, lanes=(SHORT_LANE,))
    # The short lane alone makes the video visible: poster and image roles, no playback yet.
    assert stage_of(engine, item) == "transcoding"
    assert set(roles_of(engine, item)) == {"original", "poster", "thumb", "medium", "preview"}
    drain(engine, domain, clock, lanes=(LONG_LANE,))
    roles = roles_of(engine, item)
    assert set(roles) == {"original", "poster", "thumb", "medium", "preview", "playback"}
    assert roles["playback"]["mime_type"] == "video/mp4"
    assert (roles["poster"]["width"], roles["poster"]["height"]) == (1280, 720)
    assert stage_of(engine, item) == "done"


# --------------------------------------------------------------------------- M4


def test_m4_rerun_after_a_killed_step_leaves_one_object_per_role(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, VIDEO)
    domain = media_domain(store)
    drain(engine, domain, clock)
    before_roles = roles_of(engine, item)
    before_files = files_in(store, item)
    # What a kill leaves: a half-written store object and a scratch folder. Then the stage is
    # delivered again (as after a crash between the effects and the save).
    folder = store.path(f"media/{item}")
    (folder / ".thumb.webp.0123abcd.part").write_bytes(b"half")
    (folder / ".work").mkdir()
    (folder / ".work" / ".playback.mp4.dead.tmp").write_bytes(b"half")
    with engine.begin() as conn:
        conn.execute(update(media_items).where(media_items.c.id == item).values(stage="uploaded"))
    drain(engine, domain, clock)
    assert stage_of(engine, item) == "done"
    assert roles_of(engine, item).keys() == before_roles.keys()
    assert files_in(store, item) == before_files
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(files)).scalar() == 6
        assert conn.execute(select(func.count()).select_from(media_objects)).scalar() == 6
    kinds = [e["kind"] for e in event_rows(engine)]
    assert kinds == ["item.ready", "item.playback_ready"] * 2


def test_m4_lost_claim_writes_no_roles_and_no_event(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, PHOTO)
    domain = media_domain(store)
    executor = Executor(engine, clock, PIPELINE)
    claim = executor.claim(domain, SHORT_LANE)
    assert claim is not None
    with engine.begin() as conn:  # another holder took over (P2)
        conn.execute(
            update(media_items).where(media_items.c.id == item).values(claim_token="f" * 32)
        )
    assert executor.run_claimed(domain, claim) is None
    assert set(roles_of(engine, item)) == {"original"}
    assert event_rows(engine) == []


# --------------------------------------------------------------------------- M5


def test_m5_ready_event_written_with_the_save_and_delivered_in_order(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    other = album(engine, clock, "other")
    broadcast = AlbumBroadcast(engine, poll_interval=0.05)
    first = broadcast.subscribe(album_id)  # from now
    second = broadcast.subscribe(album_id, 0)  # whole history
    photo = add(engine, store, clock, album_id, PHOTO)
    clock.advance(1)
    video = add(engine, store, clock, album_id, VIDEO)
    clock.advance(1)
    add(engine, store, clock, other, PHOTO)
    drain(engine, media_domain(store), clock)
    want = [(video, "item.ready"), (photo, "item.ready"), (video, "item.playback_ready")]
    for sub in (first, second):
        got = sub.poll(timeout=1.0)
        assert [(e.item_id, e.kind) for e in got] == want
        assert [e.id for e in got] == sorted(e.id for e in got)
        assert sub.poll(timeout=0.1) == []
    ready = first.last_id
    assert {"original", "thumb", "medium", "preview"} <= set(
        broadcast.events_after(album_id, 0)[1].payload["roles"]
    )
    assert broadcast.events_after(other, 0)[0].kind == "item.ready"
    assert ready == broadcast.latest_id(album_id)


def test_m5_reconnect_with_last_id_misses_nothing(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    broadcast = AlbumBroadcast(engine, poll_interval=0.05)
    domain = media_domain(store)
    seen: list[int] = []
    sub = broadcast.subscribe(album_id, 0)
    for _ in range(3):
        add(engine, store, clock, album_id, PHOTO)
        clock.advance(1)
    drain(engine, domain, clock)
    batch = sub.poll(timeout=1.0)
    seen += [e.id for e in batch[:1]]  # the subscriber saw one event, then the line dropped
    sub.close()
    for _ in range(2):
        add(engine, store, clock, album_id, PHOTO)
        clock.advance(1)
    drain(engine, domain, clock)
    again = broadcast.subscribe(album_id, seen[-1])
    seen += [e.id for e in again.poll(timeout=1.0)]
    assert seen == [e["id"] for e in event_rows(engine)]
    assert len(seen) == 5


def test_m5_live_subscribers_are_woken_by_workers(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    pool = WorkerPool(
        engine, [media_domain(store)], {SHORT_LANE: 2}, clock=clock, settings=PIPELINE
    )
    broadcast = AlbumBroadcast(engine, pool.notifier, poll_interval=5.0)  # wake-ups, not polls
    received: list[list[Any]] = [[], []]
    stop = threading.Event()

    def listen(mine: list[Any]) -> None:
        with broadcast.subscribe(album_id, stop=stop) as sub:
            for event in sub:
                mine.append(event)
                if len(mine) == 3:
                    return

    listeners = [threading.Thread(target=listen, args=(r,)) for r in received]
    for t in listeners:
        t.start()
    time.sleep(0.2)
    pool.start()
    try:
        for _ in range(3):
            add(engine, store, clock, album_id, PHOTO)
            clock.advance(1)
            pool.notifier.wake_local()
        started = time.monotonic()
        for t in listeners:
            t.join(timeout=4.0)
        assert time.monotonic() - started < 4.0
    finally:
        stop.set()
        pool.stop()
    for mine in received:  # several subscribers, each gets every event in order
        assert [e.kind for e in mine] == ["item.ready"] * 3
        assert [e.id for e in mine] == sorted(e.id for e in mine)


# --------------------------------------------------------------------------- M6


def test_m6_newest_upload_first(
    engine: Engine, store: LocalStore, clock: FakeClock, tmp_path: Path
) -> None:
    album_id = album(engine, clock)
    uploaded = []
    for n in range(8):
        uploaded.append(add(engine, store, clock, album_id, make_photo(tmp_path / f"{n}.jpg", n)))
        clock.advance(1 if n != 4 else 0)  # items 4 and 5 share an upload time: id decides
    drain(engine, media_domain(store), clock)
    order = [e["item_id"] for e in event_rows(engine)]
    assert order == list(reversed(uploaded))


def test_m6_newest_first_in_the_long_lane_too(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    videos = []
    for _ in range(3):
        videos.append(add(engine, store, clock, album_id, CORPUS / "file-type__fixture.mov"))
        clock.advance(1)
    domain = media_domain(store)
    drain(engine, domain, clock, lanes=(SHORT_LANE,))
    drain(engine, domain, clock, lanes=(LONG_LANE,))
    played = [e["item_id"] for e in event_rows(engine) if e["kind"] == "item.playback_ready"]
    assert played == list(reversed(videos))


# --------------------------------------------------------------------------- M7, M8


def test_m7_worker_counts_per_lane_come_from_settings(tmp_path: Path) -> None:
    settings = Settings(
        database=DatabaseSettings(url=f"sqlite:///{tmp_path / 'c.db'}"),
        media=MediaSettings(short_workers=3, long_workers=2),
    )
    runtime = Runtime(settings)
    lanes = runtime.lanes()
    assert (lanes[SHORT_LANE], lanes[LONG_LANE]) == (3, 2)
    domain = runtime.media
    assert [s.lane for s in domain.stages if not s.terminal] == [SHORT_LANE, LONG_LANE]


def test_m7_pool_runs_the_configured_workers(
    engine: Engine, store: LocalStore, clock: FakeClock
) -> None:
    pool = WorkerPool(
        engine, [media_domain(store)], {SHORT_LANE: 3, LONG_LANE: 2}, clock=clock, settings=PIPELINE
    )
    pool.start()
    try:
        names = sorted(t.name for t in threading.enumerate() if t.name.startswith("conveyor-"))
        assert [n for n in names if n.startswith("conveyor-short")] == [
            f"conveyor-short-{i}" for i in range(3)
        ]
        assert len([n for n in names if n.startswith("conveyor-long")]) == 2
    finally:
        pool.stop()


def test_m8_transcode_holds_its_claim_by_heartbeat(
    engine: Engine, store: LocalStore, long_video: Path
) -> None:
    clock = SystemClock()
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, long_video)
    domain = media_domain(store, long_lease=0.6)  # beats every 0.2 s; a transcode takes seconds
    drain(engine, domain, clock, lanes=(SHORT_LANE,))
    runner = Executor(engine, clock, PIPELINE)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (runner.run_once(domain, LONG_LANE), done.set()))
    thread.start()
    rival = Executor(engine, clock, PIPELINE)
    steals = 0
    while not done.wait(0.3):
        claim = rival.claim(domain, LONG_LANE)  # the lease would have run out long ago
        steals += claim is not None
    thread.join()
    assert steals == 0
    assert stage_of(engine, item) == "done"
    assert "playback" in roles_of(engine, item)


def test_m8_lost_claim_stops_the_transcode_at_once(
    engine: Engine, store: LocalStore, long_video: Path
) -> None:
    clock = SystemClock()
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, long_video)
    domain = media_domain(store, long_lease=0.6)
    drain(engine, domain, clock, lanes=(SHORT_LANE,))
    runner = Executor(engine, clock, PIPELINE)
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(runner.run_once(domain, LONG_LANE)))
    started = time.monotonic()
    thread.start()
    time.sleep(0.5)
    with engine.begin() as conn:  # a human resume / a new holder re-issues the claim (P2)
        conn.execute(
            update(media_items).where(media_items.c.id == item).values(claim_token="e" * 32)
        )
    thread.join()
    assert time.monotonic() - started < 3.0  # a full transcode takes longer
    assert "playback" not in roles_of(engine, item)
    assert not store.path(f"media/{item}/.work").exists()
    assert stage_of(engine, item) == "transcoding"


class _Recording(MediaSteps):
    """Media steps that note which worker thread ran which step, and when."""

    def __init__(self, store: LocalStore, settings: MediaSettings) -> None:
        super().__init__(store, settings)
        self.runs: list[tuple[str, str, int, float, float]] = []
        self._lock = threading.Lock()

    def _run(self, name: str, ctx: StepContext, step: Any) -> Outcome:
        start = time.monotonic()
        try:
            return step(ctx)  # type: ignore[no-any-return]
        finally:
            with self._lock:
                self.runs.append(
                    (
                        threading.current_thread().name,
                        name,
                        int(ctx.record["id"]),
                        start,
                        time.monotonic(),
                    )
                )

    def variants(self, ctx: StepContext) -> Outcome:
        return self._run("variants", ctx, super().variants)

    def playback(self, ctx: StepContext) -> Outcome:
        return self._run("playback", ctx, super().playback)


@pytest.mark.slow
def test_m8_long_jobs_never_starve_image_work(
    engine: Engine, store: LocalStore, clock: FakeClock, long_video: Path, tmp_path: Path
) -> None:
    """1 long + 2 short workers, 3 long videos then 200 photos: every photo gets its variants
    while the videos are still transcoding, and no short worker ever runs a transcode."""
    album_id = album(engine, clock)
    photos = []
    for n in range(200):
        photos.append(add(engine, store, clock, album_id, make_photo(tmp_path / f"p{n}.jpg", n)))
    clock.advance(1)
    # Newest first (M6): the videos' short-lane step comes first, so the long worker is busy
    # transcoding from the start while the short lane works through the photos.
    videos = [add(engine, store, clock, album_id, long_video) for _ in range(3)]
    steps = _Recording(store, MEDIA)
    domain = build_media_domain(steps)
    pool = WorkerPool(
        engine, [domain], {SHORT_LANE: 2, LONG_LANE: 1}, clock=clock, settings=PIPELINE
    )
    pool.start()
    photos_done_at = None
    still_transcoding: list[int] = []
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                rows = dict(conn.execute(select(media_items.c.id, media_items.c.stage)).all())
            if photos_done_at is None and all(rows[p] == "done" for p in photos):
                photos_done_at = time.monotonic()
                still_transcoding = [v for v in videos if rows[v] == "transcoding"]
            if all(stage == "done" for stage in rows.values()):
                break
            time.sleep(0.05)
    finally:
        pool.stop()
    assert photos_done_at is not None, "photos never finished"
    assert still_transcoding, "every video finished before the photos: no overlap to prove"
    assert all(stage_of(engine, v) == "done" for v in videos)
    for thread, name, _item, _s, _e in steps.runs:
        assert thread.startswith("conveyor-long" if name == "playback" else "conveyor-short")
    # The long worker was busy transcoding while the short lane made the photos' variants.
    playbacks = [(s, e) for _t, n, _i, s, e in steps.runs if n == "playback"]
    photo_runs = [(s, e) for _t, n, i, s, e in steps.runs if n == "variants" and i in photos]
    first_transcode = min(s for s, _e in playbacks)
    assert first_transcode < max(e for _s, e in photo_runs)
    ready = {e["item_id"] for e in event_rows(engine) if e["kind"] == "item.ready"}
    assert set(photos) | set(videos) <= ready
    shutil.rmtree(tmp_path, ignore_errors=True)
