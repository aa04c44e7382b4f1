"""Capture time from every place cameras put it, stored as an instant plus the zone (issue 21):
EXIF DateTimeOriginal with OffsetTimeOriginal, else OffsetTime/OffsetTimeDigitized, else the
zone the GPS time gives; QuickTime and Matroska creation dates. The album sorts by it. A video
whose frames stop short of its declared duration says so. Real files, both databases."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import pyvips
from sqlalchemy import Engine, select

from conveyor.db.tables import record_events
from conveyor.media.albums import album_items, item_view
from conveyor.media.images.header import probe_image
from conveyor.media.video import probe_video
from conveyor.objects import LocalStore, ObjectStore, WorkFolder
from conveyor.testing import FakeClock
from tests.support.media import MEDIA, add, album, drain, media_domain

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media"


def photo_with(path: Path, tags: dict[str, str]) -> Path:
    """A small JPEG carrying the EXIF string ``tags`` (libvips writes them on save)."""
    image = pyvips.Image.black(64, 48, bands=3).cast("uchar").copy()
    for name, value in tags.items():
        image.set_type(pyvips.GValue.gstr_type, f"exif-ifd2-{name}", value)
    image.jpegsave(str(path))
    return path


def video_with(path: Path, container: str, tags: dict[str, str], frames: int = 10) -> Path:
    options = {"movflags": "use_metadata_tags"} if container == "mov" else {}
    with av.open(str(path), "w", format=container, options=options) as out:
        out.metadata.update(tags)
        stream: Any = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(frames):
            rgb = np.full((48, 64, 3), index * 20 % 256, np.uint8)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = index, Fraction(1, 25)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


LOCAL = "2024:07:01 14:05:11"
INSTANT = 1_719_835_511.0  # 2024-07-01T12:05:11Z


@pytest.mark.parametrize(
    ("tags", "offset"),
    [
        ({"DateTimeOriginal": LOCAL, "OffsetTimeOriginal": "+02:00"}, 120),
        # Editor exports: the zone only in OffsetTime (stored two hours off before).
        ({"DateTimeOriginal": LOCAL, "OffsetTime": "+02:00"}, 120),
        ({"DateTimeOriginal": LOCAL, "OffsetTimeDigitized": "+02:00"}, 120),
        # The original's own offset wins over the others.
        ({"DateTimeOriginal": LOCAL, "OffsetTimeOriginal": "+02:00", "OffsetTime": "-05:00"}, 120),
    ],
)
def test_the_zone_comes_from_whichever_offset_tag_the_camera_wrote(
    tmp_path: Path, tags: dict[str, str], offset: int
) -> None:
    info = probe_image(photo_with(tmp_path / "p.jpg", tags), max_pixels=MEDIA.max_pixels)
    assert info.captured_offset == offset
    assert info.captured_at is not None and info.captured_at.timestamp() == INSTANT


def test_gps_time_gives_the_zone_and_a_stale_fix_does_not() -> None:
    # iPhone HEIC: local 11:04:22, GPS 16:04:21 UTC: taken at UTC-05:00.
    heic = probe_image(CORPUS / "immich-test-assets__IMG_2682.heic", max_pixels=MEDIA.max_pixels)
    assert heic.captured_offset == -300
    assert heic.captured_at is not None
    assert heic.captured_at.isoformat() == "2019-03-21T16:04:22+00:00"
    # Nikon: a GPS fix 22 hours from the clock is no zone; the local time stays, zone unknown.
    nikon = probe_image(CORPUS / "exif-samples__DSCN0010.jpg", max_pixels=MEDIA.max_pixels)
    assert nikon.captured_offset is None
    assert nikon.captured_at is not None
    assert nikon.captured_at.isoformat() == "2008-10-22T16:28:39+00:00"


def test_quicktime_and_matroska_dates_give_instant_and_zone(tmp_path: Path) -> None:
    mov = video_with(
        tmp_path / "IMG_0001.MOV",
        "mov",
        {"com.apple.quicktime.creationdate": "2024-07-01T14:05:11+0200"},
    )
    mkv = video_with(
        tmp_path / "clip.mkv", "matroska", {"DATE_RECORDED": "2024-07-01T14:05:11+02:00"}
    )
    for path in (mov, mkv):
        info = probe_video(path)
        assert info.captured_at is not None and info.captured_at.timestamp() == INSTANT, path
        assert info.captured_offset == 120, path


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))


def test_items_show_local_time_with_zone_and_the_album_sorts_by_capture(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    album_id = album(engine, clock)
    later = photo_with(
        tmp_path / "later.jpg", {"DateTimeOriginal": "2024:07:02 09:00:00", "OffsetTime": "+02:00"}
    )
    zoned = add(engine, store, clock, album_id, later)
    clock.advance(10)
    earlier = add(
        engine,
        store,
        clock,
        album_id,
        photo_with(tmp_path / "p.jpg", {"DateTimeOriginal": LOCAL, "OffsetTime": "+02:00"}),
    )
    clock.advance(10)
    unknown = add(engine, store, clock, album_id, CORPUS / "exif-samples__Canon_40D.jpg")
    with engine.connect() as conn:
        view = item_view(conn, earlier)
        assert view["captured_at"] == "2024-07-01T12:05:11Z"
        assert view["captured_offset"] == 120
        assert view["captured_local"] == "2024-07-01T14:05:11+02:00"
        other = item_view(conn, unknown)
        assert other["captured_offset"] is None and other["captured_local"] is None
        # Newest capture first, whatever the upload order (the 2008 photo came last).
        assert [i["id"] for i in album_items(conn, album_id)] == [zoned, earlier, unknown]


def test_a_video_cut_off_mid_write_says_it_is_incomplete(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    whole = tmp_path / "whole.mp4"
    with av.open(str(whole), "w", format="mp4", options={"movflags": "+faststart"}) as out:
        stream: Any = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        stream.bit_rate = 2_000_000
        rng = np.random.default_rng(3)
        for index in range(150):  # 6 s of noise: the bytes grow with the frames
            rgb = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = index, Fraction(1, 25)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    data = whole.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])  # the index (moov) first, then half the frames
    album_id = album(engine, clock)
    items = {
        name: add(engine, store, clock, album_id, path)
        for name, path in (("whole", whole), ("cut", cut))
    }
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        full, half = item_view(conn, items["whole"]), item_view(conn, items["cut"])
        notes = list(
            conn.execute(
                select(record_events.c.outcome_text).where(
                    record_events.c.domain == "media", record_events.c.record_id == items["cut"]
                )
            ).scalars()
        )
    assert full["done"] and not full["incomplete"]
    assert half["done"] and half["incomplete"]
    assert half["duration"] is not None and 2.0 < half["duration"] < 4.5
    assert any(
        "incomplete: its frames stop at" in (n or "") and "6.0 s" in (n or "") for n in notes
    )
