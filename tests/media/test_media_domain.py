"""The media domain on the engine (NORMS M1-M8), on SQLite and PostgreSQL; real files, no mocks."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pyvips
from prometheus_client import REGISTRY
from sqlalchemy import Engine, event, func, select, update

from conveyor.config import DatabaseSettings, MediaSettings, Settings
from conveyor.db.tables import album_events, files, media_items, media_objects
from conveyor.media.albums import item_view
from conveyor.media.broadcast import AlbumBroadcast
from conveyor.media.domain import (
    IMAGE_ROLES,
    LONG_LANE,
    SHORT_LANE,
    MediaSteps,
    build_media_domain,
)
from conveyor.objects import LocalStore, ObjectStore, WorkFolder, sweep_orphans
from conveyor.pipeline import Claim, Executor, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from conveyor.pipeline.queries import now_of
from conveyor.pipeline.rescuer import rescue
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock
from tests.support.media import (
    MEDIA,
    PIPELINE,
    add,
    album,
    drain,
    make_photo,
    make_video,
    media_domain,
)
from tests.support.stored import object_keys, stored_bytes

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media"
PHOTO = CORPUS / "exif-samples__landscape_6.jpg"
VIDEO = CORPUS / "moviepy__fire2.mp4"


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))


@pytest.fixture(scope="module")
def long_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6 s 1080p MPEG-4 video: a few seconds of real transcoding."""
    return make_video(
        tmp_path_factory.mktemp("videos") / "long.mp4", width=1920, height=1080, seconds=6
    )


@pytest.fixture(scope="module")
def short_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 s small MPEG-4 video: transcoded, never remuxed, in well under a second."""
    return make_video(
        tmp_path_factory.mktemp("videos") / "short.mp4", width=320, height=240, seconds=2
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


def files_in(store: ObjectStore, item_id: int) -> list[str]:
    return object_keys(store, f"media/{item_id}")


# --------------------------------------------------------------------------- M1-M3


def test_m1_every_object_is_one_journal_row(
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    photo = add(engine, store, clock, album_id, PHOTO)
    video = add(engine, store, clock, album_id, VIDEO)
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        journal = conn.execute(select(files)).mappings().all()
        refs = conn.execute(select(media_objects)).mappings().all()
    assert len(refs) == 4 + 6  # photo: 4 roles; video: 6
    # Roles with equal bytes name one object (the medium and preview of the 600 px photo and
    # of the 640 px poster): one journal row per object, every row named by a role (M1).
    assert {r["file_id"] for r in refs} == {r["id"] for r in journal}
    assert len(journal) == 3 + 5
    assert len({r["key"] for r in journal}) == len(journal)
    by_id = {r["id"]: r for r in journal}
    checked = []
    for item_id in (photo, video):
        for role, obj in roles_of(engine, item_id).items():
            checked.append((item_id, role))
            row = by_id[
                next(r["file_id"] for r in refs if (r["item_id"], r["role"]) == (item_id, role))
            ]
            found = store.stat(row["key"])
            assert found is not None and found.size == row["size"] == obj["size"], role
            assert row["state"] == "ready"
            assert row["width"] and row["height"], role
    assert len(checked) == len(refs)  # every role's object was checked against its file
    assert roles_of(engine, photo)["original"]["mime_type"] == "image/jpeg"
    assert roles_of(engine, video)["playback"]["duration"] == pytest.approx(2.38, abs=0.1)


def test_m1_mime_type_is_sniffed_not_named(
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, CORPUS / "lychee__mongolia")  # no extension
    assert roles_of(engine, item)["original"]["mime_type"] == "image/jpeg"


def test_m2_original_served_before_variants(
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, PHOTO)
    with engine.connect() as conn:
        view = item_view(conn, item)
    assert view["stage"] == "uploaded"
    assert set(view["roles"]) == {"original"}
    assert (view["width"], view["height"]) == (600, 450)  # upright from the header already
    original = view["roles"]["original"]
    assert stored_bytes(store, original["key"]) == PHOTO.read_bytes()  # stored unchanged
    drain(engine, media_domain(store), clock)
    assert set(roles_of(engine, item)) == {"original", "thumb", "medium", "preview"}
    assert stage_of(engine, item) == "done"


def test_m1_photo_header_is_read_once_at_intake_and_once_for_the_decode(
    engine: Engine, store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
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
    engine: Engine, store: ObjectStore, clock: FakeClock
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
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, VIDEO)
    domain = media_domain(store)
    drain(engine, domain, clock)
    before_roles = roles_of(engine, item)
    before_files = files_in(store, item)
    # The original is under uploads/; the poster's medium and preview are one object.
    assert len(before_files) == 4
    # The stage is delivered again (as after a crash between the effects and the save).
    with engine.begin() as conn:
        conn.execute(update(media_items).where(media_items.c.id == item).values(stage="uploaded"))
    drain(engine, domain, clock)
    assert stage_of(engine, item) == "done"
    after_roles = roles_of(engine, item)
    assert after_roles.keys() == before_roles.keys()
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(files)).scalar() == 5
        assert conn.execute(select(func.count()).select_from(media_objects)).scalar() == 6
        journal = set(conn.execute(select(files.c.key)).scalars())
    # The re-run wrote under its own claim's keys and took over the journal rows; the first
    # run's objects are named by no row, and the sweep removes them (M1).
    assert {r["key"] for r in after_roles.values()} == journal
    assert not journal & set(before_files)
    report = sweep_orphans(engine, store, grace=0, now=time.time() + 1)
    assert sorted(report.removed) == before_files
    assert files_in(store, item) == sorted(k for k in journal if k.startswith("media/"))
    kinds = [e["kind"] for e in event_rows(engine)]
    assert kinds == ["item.ready", "item.playback_ready"] * 2


class _StealsOnLastKeep(MediaSteps):
    """Media steps whose claim is taken over by a rival mid-step: after the last variant is in
    the store and past the step's last ``check``, so the step goes on to its guarded save."""

    def __init__(self, engine: Engine, clock: FakeClock, store: ObjectStore) -> None:
        super().__init__(store, MEDIA)
        self.engine, self.clock = engine, clock
        self.kept: list[str] = []
        self.thief: Claim | None = None
        self.lost_seen_by_step: bool | None = None

    def _keep(self, ctx: StepContext, role: str, path: Path, *a: Any, **kw: Any) -> Any:
        kept = super()._keep(ctx, role, path, *a, **kw)
        self.kept.append(role)
        if len(self.kept) == len(IMAGE_ROLES):
            # The lease runs out under the step: its worker counts as lost (D18), and after
            # the retry pause another worker claims the item (P2).
            self.clock.advance(ctx.stage.lease + 1)
            assert rescue(self.engine, ctx.domain, PIPELINE, now_of(self.clock)) == 1
            self.clock.advance(PIPELINE.retry_max)
            self.thief = Executor(self.engine, self.clock, PIPELINE).claim(ctx.domain, SHORT_LANE)
            self.lost_seen_by_step = ctx.lost.is_set()
        return kept


def test_m4_claim_lost_mid_step_refuses_the_save_writes_no_roles_and_no_event(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    album_id = album(engine, clock)
    # Larger than every role's edge: three distinct variants, each stored.
    item = add(engine, store, clock, album_id, make_photo(tmp_path / "big.jpg", 1, (3000, 2000)))
    steps = _StealsOnLastKeep(engine, clock, store)
    domain = build_media_domain(steps)
    executor = Executor(engine, clock, PIPELINE)
    claim = executor.claim(domain, SHORT_LANE)
    assert claim is not None and claim.record_id == item
    before = _item_row(engine, item)
    updates: list[tuple[list[Any], int | None]] = []

    def watch(_c: Any, cursor: Any, statement: str, params: Any, *_a: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE MEDIA_ITEMS"):
            values = list(params.values()) if isinstance(params, dict) else list(params)
            # An UPDATE … RETURNING (the step's start) tells what it matched by its rows, not
            # read yet here (SQLite counts them as they are read).
            returning = " RETURNING " in statement.upper()
            updates.append((values, None if returning else cursor.rowcount))

    lost_before = _lost_count("uploaded")
    event.listen(engine, "after_cursor_execute", watch)
    try:
        assert executor.run_claimed(domain, claim) is None
    finally:
        event.remove(engine, "after_cursor_execute", watch)

    # The step ran to its end: every variant was made and put in the store under its key.
    assert sorted(steps.kept) == sorted(IMAGE_ROLES)
    assert steps.thief is not None and steps.thief.record_id == item
    assert steps.thief.token != claim.token
    assert steps.lost_seen_by_step is False  # no heartbeat told the step: its save must refuse
    # The step's save was tried with its own token, and matched no row (before it: the
    # step's start, which matched since the step ran, and the rescue of its lapsed claim, D18).
    guarded = [rowcount for params, rowcount in updates if claim.token in params]
    assert guarded == [None, 1, 0]
    # Nothing of it landed: no role, no journal row, no album event; the thief holds the item.
    assert set(roles_of(engine, item)) == {"original"}
    assert event_rows(engine) == []
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(files)).scalar() == 1
    after = _item_row(engine, item)
    assert after["claim_token"] == steps.thief.token
    assert after["claim_expires_at"] == clock.now() + domain.stage("uploaded").lease
    # What changed: the claim, and the lost worker's failed attempt (D18).
    claim_columns = {"claim_token", "claim_expires_at", "attempts", "retry_at", "updated_at"}
    assert after["attempts"] == 1
    assert {k: v for k, v in after.items() if k not in claim_columns} == {
        k: v for k, v in before.items() if k not in claim_columns
    }
    assert _lost_count("uploaded") == lost_before + 1


def _item_row(engine: Engine, item_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        found = conn.execute(select(media_items).where(media_items.c.id == item_id)).mappings()
        return dict(found.one())


def _lost_count(stage: str) -> float:
    sample = REGISTRY.get_sample_value(
        "conveyor_claims_lost_total", {"domain": "media", "stage": stage}
    )
    return sample or 0.0


# --------------------------------------------------------------------------- M5


def test_m5_ready_event_written_with_the_save_and_delivered_in_order(
    engine: Engine, store: ObjectStore, clock: FakeClock
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
    engine: Engine, store: ObjectStore, clock: FakeClock
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
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    album_id = album(engine, clock)
    pool = WorkerPool(
        engine, [media_domain(store)], {SHORT_LANE: 2}, clock=clock, settings=PIPELINE
    )
    # A poll an hour away: only a worker's wake-up can deliver the events before the join ends.
    broadcast = AlbumBroadcast(engine, pool.notifier, poll_interval=3600.0)
    received: list[list[Any]] = [[], []]
    stop = threading.Event()
    subscribed = threading.Barrier(len(received) + 1)

    def listen(mine: list[Any]) -> None:
        with broadcast.subscribe(album_id, stop=stop) as sub:
            subscribed.wait()
            for event in sub:
                mine.append(event)
                if len(mine) == 3:
                    return

    listeners = [threading.Thread(target=listen, args=(r,), daemon=True) for r in received]
    for t in listeners:
        t.start()
    subscribed.wait(timeout=60)  # both subscriptions start before the first event exists
    pool.start()
    try:
        for _ in range(3):
            add(engine, store, clock, album_id, PHOTO)
            clock.advance(1)
            pool.notifier.wake_local()
        for t in listeners:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in listeners), "a subscriber was never woken"
    finally:
        stop.set()
        pool.notifier.wake_local()  # a subscriber still waiting sees ``stop``
        pool.stop()
    for mine in received:  # several subscribers, each gets every event in order
        assert [e.kind for e in mine] == ["item.ready"] * 3
        assert [e.id for e in mine] == sorted(e.id for e in mine)


# --------------------------------------------------------------------------- M6


def test_m6_newest_upload_first(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
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
    engine: Engine, store: ObjectStore, clock: FakeClock
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
    engine: Engine, store: ObjectStore, clock: FakeClock
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


class _WatchedPlayback(MediaSteps):
    """Media steps whose playback step reports every ``ctx.check()`` (the transcode's progress
    calls and the check after it) to ``on_check`` before the check runs."""

    def __init__(self, store: ObjectStore, on_check: Callable[[StepContext, int], None]) -> None:
        super().__init__(store, MEDIA)
        self.on_check = on_check
        self.checks = 0

    def playback(self, ctx: StepContext) -> Outcome:
        steps = self

        class Watched(StepContext):
            def check(self) -> None:
                steps.checks += 1
                steps.on_check(self, steps.checks)
                super().check()

        # The same claim, record and events (``lost`` is shared with the heartbeat thread).
        same = {f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx) if f.init}
        return super().playback(Watched(**same))


def _expires_at(engine: Engine, item_id: int) -> float | None:
    with engine.connect() as conn:
        value = conn.execute(
            select(media_items.c.claim_expires_at).where(media_items.c.id == item_id)
        ).scalar()
    return None if value is None else float(value)


def _heartbeat_at(engine: Engine, item_id: int, at: float) -> bool:
    return _expires_at(engine, item_id) == at


def _until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait for an event that must come (a heartbeat, a thread); the timeout only ends a hang."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_m8_transcode_holds_its_claim_by_heartbeat(
    engine: Engine, store: ObjectStore, clock: FakeClock, short_video: Path
) -> None:
    """While the transcode runs, the fake clock passes the lease again and again; each time a
    heartbeat moves the lease end, and a rival's claim finds nothing."""
    lease, rounds = 0.6, 5  # beats every 0.2 s of real time
    transcoding, rivals_done = threading.Event(), threading.Event()

    def hold_at_start(_ctx: StepContext, n: int) -> None:
        if n == 1:  # the transcode's first progress report: it is running now
            transcoding.set()
            assert rivals_done.wait(120), "the rival rounds never finished"

    steps = _WatchedPlayback(store, hold_at_start)
    domain = build_media_domain(steps, long_lease=lease)
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, short_video)
    drain(engine, domain, clock, lanes=(SHORT_LANE,))
    runner = Executor(engine, clock, PIPELINE)
    thread = threading.Thread(target=runner.run_once, args=(domain, LONG_LANE))
    thread.start()
    rival = Executor(engine, clock, PIPELINE)
    rival_claims: list[Claim | None] = []
    try:
        assert transcoding.wait(60), "the transcode never started"
        for _ in range(rounds):
            clock.advance(lease * 2 / 3)
            now = clock.now()
            _until(partial(_heartbeat_at, engine, item, now + lease), "a heartbeat")
            rival_claims.append(rival.claim(domain, LONG_LANE))
    finally:
        rivals_done.set()
        thread.join()
    # The rounds ran, and together they outlast the lease several times over.
    assert len(rival_claims) == rounds and rounds * lease * 2 / 3 > 3 * lease
    assert rival_claims == [None] * rounds
    assert stage_of(engine, item) == "done"
    assert "playback" in roles_of(engine, item)


def test_m8_lost_claim_stops_the_transcode_at_once(
    engine: Engine, store: ObjectStore, clock: FakeClock, short_video: Path
) -> None:
    """A rival takes the item mid-transcode; once the heartbeat has found the claim gone, the
    transcode's very next progress check ends it: no further progress, nothing saved."""
    lease = 0.6
    thief: list[Claim] = []
    checks_after_lost: list[int] = []

    def steal_at_second_report(ctx: StepContext, n: int) -> None:
        if ctx.lost.is_set():
            checks_after_lost.append(n)
        if n == 2:  # a progress report from inside the transcode (the first is at 0 %)
            rival = Executor(engine, clock, PIPELINE)
            for _ in range(100):  # a beat may land between the advance and the rescue
                clock.advance(lease + 0.1)
                if not rescue(engine, ctx.domain, PIPELINE, now_of(clock)):
                    continue  # D18: its worker counts as lost, then the retry pause
                clock.advance(PIPELINE.retry_max)
                if (got := rival.claim(ctx.domain, LONG_LANE)) is not None:
                    thief.append(got)
                    break
            _until(ctx.lost.is_set, "the heartbeat to find the claim gone")
            checks_after_lost.append(n)

    steps = _WatchedPlayback(store, steal_at_second_report)
    domain = build_media_domain(steps, long_lease=lease)
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, short_video)
    drain(engine, domain, clock, lanes=(SHORT_LANE,))
    events_before = event_rows(engine)
    runner = Executor(engine, clock, PIPELINE)
    claim = runner.claim(domain, LONG_LANE)
    assert claim is not None
    assert runner.run_claimed(domain, claim) is None
    assert len(thief) == 1 and thief[0].token != claim.token
    # The check that knew of the loss was the last one: the transcode went no further.
    assert checks_after_lost == [2] and steps.checks == 2
    assert "playback" not in roles_of(engine, item)
    assert not [k for k in files_in(store, item) if "playback" in k]
    assert event_rows(engine) == events_before
    with engine.connect() as conn:
        row = conn.execute(select(media_items).where(media_items.c.id == item)).mappings().one()
    # The thief's claim stands as it wrote it: the first holder's heartbeat was refused.
    assert (row["stage"], row["claim_token"]) == ("transcoding", thief[0].token)
    assert row["claim_expires_at"] == clock.now() + lease


class _Recording(MediaSteps):
    """Media steps that note which worker thread ran which step, and when."""

    def __init__(self, store: ObjectStore, settings: MediaSettings) -> None:
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


class _GatedPlayback(_Recording):
    """Recording steps whose transcodes wait at a gate until the test opens it.

    A transcode that has started holds its long-lane worker until the photos are done, so the
    overlap the test proves does not hang on how fast this machine encodes video. If a short
    worker ever took a transcode it would wait at the gate too, and the photos would stall.
    """

    def __init__(self, store: ObjectStore, settings: MediaSettings) -> None:
        super().__init__(store, settings)
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def playback(self, ctx: StepContext) -> Outcome:
        def gated(ctx: StepContext) -> Outcome:
            self.waiting.set()
            self.gate.wait(timeout=240)
            return MediaSteps.playback(self, ctx)

        return self._run("playback", ctx, gated)


@pytest.mark.slow
def test_m8_long_jobs_never_starve_image_work(
    engine: Engine, store: ObjectStore, clock: FakeClock, long_video: Path, tmp_path: Path
) -> None:
    """1 long + 2 short workers, 3 long videos then 200 photos: every photo gets its variants
    while a video is transcoding, and no short worker ever runs a transcode."""
    album_id = album(engine, clock)
    photos = []
    for n in range(200):
        photos.append(add(engine, store, clock, album_id, make_photo(tmp_path / f"p{n}.jpg", n)))
    clock.advance(1)
    # Newest first (M6): the videos' short-lane step comes first, so the long worker is busy
    # transcoding from the start while the short lane works through the photos.
    videos = [add(engine, store, clock, album_id, long_video) for _ in range(3)]
    steps = _GatedPlayback(store, MEDIA)
    domain = build_media_domain(steps)
    pool = WorkerPool(
        engine, [domain], {SHORT_LANE: 2, LONG_LANE: 1}, clock=clock, settings=PIPELINE
    )
    pool.start()
    photos_done = False
    transcoding_meanwhile: list[int] = []
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                rows = dict(conn.execute(select(media_items.c.id, media_items.c.stage)).all())
            if not photos_done and all(rows[p] == "done" for p in photos):
                photos_done = True
                transcoding_meanwhile = [v for v in videos if rows[v] == "transcoding"]
                steps.gate.set()
            if all(stage == "done" for stage in rows.values()):
                break
            time.sleep(0.05)
    finally:
        steps.gate.set()
        pool.stop()
    assert photos_done, "photos never finished"
    # The long worker held a transcode the whole time the short lane made the photos' variants.
    assert steps.waiting.is_set(), "no transcode started before the photos were done"
    assert transcoding_meanwhile, "no video was transcoding while the photos were made"
    assert all(stage_of(engine, v) == "done" for v in videos)
    for thread, name, _item, _s, _e in steps.runs:
        assert thread.startswith("conveyor-long" if name == "playback" else "conveyor-short")
    playbacks = [(s, e) for _t, n, _i, s, e in steps.runs if n == "playback"]
    photo_runs = [(s, e) for _t, n, i, s, e in steps.runs if n == "variants" and i in photos]
    first_transcode = min(s for s, _e in playbacks)
    assert first_transcode < max(e for _s, e in photo_runs)
    ready = {e["item_id"] for e in event_rows(engine) if e["kind"] == "item.ready"}
    assert set(photos) | set(videos) <= ready
    shutil.rmtree(tmp_path, ignore_errors=True)
