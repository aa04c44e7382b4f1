"""Motion photos and Live Photos (issue 21): the clip a Google or Samsung motion photo carries,
and the movie an iPhone Live Photo is paired with by its content identifier (in whichever order
the two files arrive), become the ``motion`` role of the photo's one item: H.264/AAC, made in
the long lane like a video's ``playback`` (M3, M7), and played on the item's page. The files are
corpus images and videos given the metadata phones write (tests/support/motion.py)."""

from __future__ import annotations

from pathlib import Path

import av
import pytest
from sqlalchemy import Engine, func, select

from conveyor.db.tables import media_items, record_events
from conveyor.media.albums import item_view
from conveyor.media.images.motion import embedded_clip, movie_content_id, still_content_id
from conveyor.media.stages import SHORT_LANE
from conveyor.objects import LocalStore, ObjectStore, WorkFolder
from conveyor.pipeline import Executor
from conveyor.pipeline.claims import Held
from conveyor.pipeline.producer import LaneClaims, claim_jobs
from conveyor.pipeline.queries import now_of
from conveyor.testing import FakeClock
from tests.support.media import PIPELINE, add, album, drain, media_domain
from tests.support.motion import LIVE_ID, live_still, motion_photo
from tests.support.needs import MEDIA_CORPUS

STILL = MEDIA_CORPUS / "exif-samples__DSCN0010.jpg"
CLIP = MEDIA_CORPUS / "moviepy__fire2.mp4"
LIVE_MOVIE = MEDIA_CORPUS / "lychee__train.mov"


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))


def _check_motion(view: dict[str, object], store: ObjectStore, seconds: float) -> None:
    """The item is a done photo whose ``motion`` role is web-playable H.264 of the clip."""
    assert view["done"] and view["kind"] == "photo", view
    roles = view["roles"]
    assert isinstance(roles, dict)
    assert {"original", "thumb", "medium", "preview", "motion"} <= set(roles)
    motion = roles["motion"]
    assert motion["mime_type"] == "video/mp4"
    assert abs(float(motion["duration"]) - seconds) < 0.5, motion
    with store.local_copy(motion["key"]) as copy, av.open(str(copy)) as played:
        assert played.streams.video[0].codec_context.name == "h264"


def _duration(path: Path) -> float:
    with av.open(str(path)) as container:
        return float(container.duration or 0) / 1_000_000


@pytest.mark.parametrize("style", ["container", "micro_video", "samsung"])
def test_M3_a_motion_photos_clip_becomes_its_motion_role(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path, style: str
) -> None:
    path = motion_photo(tmp_path / f"PXL_{style}.MP.jpg", STILL, CLIP, style)
    clip = embedded_clip(path)
    assert clip is not None and clip.length == CLIP.stat().st_size
    album_id = album(engine, clock)
    item_id = add(engine, store, clock, album_id, path)
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        view = item_view(conn, item_id)
        stages = list(
            conn.execute(
                select(record_events.c.stage)
                .where(record_events.c.domain == "media", record_events.c.record_id == item_id)
                .order_by(record_events.c.id)
            ).scalars()
        )
    _check_motion(view, store, _duration(CLIP))
    assert "transcoding" in stages  # the clip was made in the long lane
    # The still itself is the photo: its width is the JPEG's, not the clip's.
    assert (view["width"], view["height"]) == (640, 480)


def test_a_plain_photo_or_a_claim_no_mp4_backs_stays_a_still(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    # XMP that says 1,000 bytes of video, over a plain JPEG's end: no ftyp there.
    fake = motion_photo(tmp_path / "fake.jpg", STILL, CLIP, "micro_video")
    data = fake.read_bytes()
    fake.write_bytes(data[: -CLIP.stat().st_size] + b"\0" * 1000)
    assert embedded_clip(fake) is None and embedded_clip(STILL) is None
    album_id = album(engine, clock)
    item_id = add(engine, store, clock, album_id, fake)
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        view = item_view(conn, item_id)
    assert view["done"] and "motion" not in view["roles"]


def test_the_live_photo_identifiers_are_read_from_both_halves(tmp_path: Path) -> None:
    assert movie_content_id(LIVE_MOVIE) == LIVE_ID
    assert still_content_id(live_still(tmp_path / "IMG_0001.JPG", STILL)) == LIVE_ID
    assert still_content_id(STILL) is None and movie_content_id(CLIP) is None


def _items(engine: Engine, album_id: int) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(media_items.c.album_id == album_id)
            ).scalar_one()
        )


def test_a_live_photo_still_then_movie_is_one_item_with_motion(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    """The still is done before its movie comes: the movie joins it (no item of its own) and
    sends it back to the long lane for its clip."""
    album_id = album(engine, clock)
    still_id = add(engine, store, clock, album_id, live_still(tmp_path / "IMG_0001.JPG", STILL))
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        assert item_view(conn, still_id)["done"]
    assert add(engine, store, clock, album_id, LIVE_MOVIE) == still_id
    assert _items(engine, album_id) == 1
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        view = item_view(conn, still_id)
    _check_motion(view, store, _duration(LIVE_MOVIE))
    assert view["roles"]["motion_original"]["mime_type"] == "video/quicktime"


def test_a_live_photo_movie_then_still_is_one_item_with_motion(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    """The movie came first and was already a video item: the still takes its movie, and that
    video item goes (its own variants with it)."""
    album_id = album(engine, clock)
    movie_id = add(engine, store, clock, album_id, LIVE_MOVIE)
    drain(engine, media_domain(store), clock)
    still_id = add(engine, store, clock, album_id, live_still(tmp_path / "IMG_0002.JPG", STILL))
    assert still_id != movie_id and _items(engine, album_id) == 1
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        view = item_view(conn, still_id)
        assert conn.execute(select(media_items).where(media_items.c.id == movie_id)).first() is None
    _check_motion(view, store, _duration(LIVE_MOVIE))
    with store.local_copy(view["roles"]["motion_original"]["key"]) as copy:
        assert copy.read_bytes() == LIVE_MOVIE.read_bytes()  # the upload, kept as it came


def test_live_photos_pair_only_within_one_album(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    first, second = album(engine, clock, "one"), album(engine, clock, "two")
    still_id = add(engine, store, clock, first, live_still(tmp_path / "IMG_0003.JPG", STILL))
    movie_id = add(engine, store, clock, second, LIVE_MOVIE)
    assert movie_id != still_id
    assert (_items(engine, first), _items(engine, second)) == (1, 1)


def test_a_movie_paired_while_the_stills_variants_run_is_not_lost(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    """The browser sends both halves at once: the movie is paired after the still's variants
    step read its roles and before it saves. The save still sends the photo on for its clip."""
    album_id = album(engine, clock)
    still_id = add(engine, store, clock, album_id, live_still(tmp_path / "IMG_0004.JPG", STILL))
    domain = media_domain(store)
    executor = Executor(engine, clock, PIPELINE, held=Held())
    with engine.connect() as conn:
        (job,) = claim_jobs(conn, LaneClaims(domain, SHORT_LANE, now_of(clock)), 1, holder="host:1")
        finished = executor.execute(job)  # the variants, made without the movie
        assert finished is not None
        assert add(engine, store, clock, album_id, LIVE_MOVIE) == still_id
        (applied,) = executor.saver.save(conn, [finished])
    assert applied is not None and applied.outcome == "advanced"
    with engine.connect() as conn:
        stage = conn.execute(
            select(media_items.c.stage).where(media_items.c.id == still_id)
        ).scalar_one()
    assert stage == "transcoding"
    drain(engine, domain, clock)
    with engine.connect() as conn:
        _check_motion(item_view(conn, still_id), store, _duration(LIVE_MOVIE))
