"""Camcorder and recorder video is accepted and plays (issue 21): MPEG transport streams (.ts,
AVCHD .MTS/.M2TS with 192-byte packets), MPEG program streams (.VOB/.MOD/.MPG) and streams no
signature names, probed with PyAV before refusing; interlaced sources are deinterlaced. The
files are written by PyAV here (small), and go through intake and the pipeline on both
databases."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from sqlalchemy import Engine, select

from conveyor.db.tables import record_events
from conveyor.errors import UnsupportedMedia
from conveyor.media import queries
from conveyor.media.albums import item_view
from conveyor.media.intake import accept_media, probe_upload
from conveyor.objects import LocalStore, ObjectStore, WorkFolder
from conveyor.objects.sniff import sniff
from conveyor.testing import FakeClock
from tests.support.media import MEDIA, album, drain, media_domain
from tests.support.stored import stored_bytes

FPS = 25


def write_video(
    path: Path,
    container: str,
    codec: str,
    *,
    size: tuple[int, int] = (720, 576),
    interlaced: bool = False,
    options: dict[str, str] | None = None,
    frames: int = 25,
) -> Path:
    """``frames`` frames of a bar moving over a gradient, with MP2 sound unless raw."""
    width, height = size
    with av.open(str(path), "w", format=container, options=options or {}) as out:
        video: Any = out.add_stream(codec, rate=FPS)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        if interlaced:  # field-coded pictures, as a camcorder writes them
            flags = av.codec.context.Flags
            video.codec_context.flags |= flags.interlaced_dct | flags.interlaced_me
        sound = out.add_stream("mp2", rate=48_000) if container != "h264" else None
        if sound is not None:
            sound.layout = "stereo"
        y, x = np.mgrid[0:height, 0:width]
        for index in range(frames):
            rgb = np.zeros((height, width, 3), np.uint8)
            rgb[..., 0], rgb[..., 1] = x * 255 // width, y * 255 // height
            left = index * 16 % width
            rgb[:, left : left + 40] = 255
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = index, Fraction(1, FPS)
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        if sound is not None:
            for index in range(48_000 * frames // FPS // 1152):
                samples = np.zeros((1, 2 * 1152), np.int16)
                chunk = av.AudioFrame.from_ndarray(samples, format="s16", layout="stereo")
                chunk.sample_rate, chunk.pts = 48_000, index * 1152
                out.mux(sound.encode(chunk))
            out.mux(sound.encode(None))
    return path


@pytest.fixture(scope="module")
def camcorder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("camcorder")
    return {
        # AVCHD: H.264 fields in a BDAV transport stream (4-byte timecode + 188-byte packet).
        "00001.MTS": write_video(
            folder / "00001.MTS",
            "mpegts",
            "h264",
            interlaced=True,
            options={"mpegts_m2ts_mode": "1"},
        ),
        "rec.ts": write_video(folder / "rec.ts", "mpegts", "mpeg2video", size=(352, 288)),
        # DVD / MOD: MPEG-2 fields in a program stream.
        "VTS_01_1.VOB": write_video(folder / "VTS_01_1.VOB", "vob", "mpeg2video", interlaced=True),
        "clip.mpg": write_video(folder / "clip.mpg", "mpeg", "mpeg1video", size=(352, 288)),
        # No container at all: an H.264 elementary stream no signature names.
        "raw.h264": write_video(folder / "raw.h264", "h264", "h264", size=(320, 240)),
    }


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))


def test_transport_and_program_streams_are_sniffed_as_video(camcorder: dict[str, Path]) -> None:
    kinds = {name: sniff(path) for name, path in camcorder.items()}
    assert kinds["00001.MTS"].mime == kinds["rec.ts"].mime == "video/mp2t"
    assert kinds["VTS_01_1.VOB"].mime == kinds["clip.mpg"].mime == "video/mpeg"
    assert all(k.kind == "video" for n, k in kinds.items() if n != "raw.h264")
    assert kinds["raw.h264"].kind == "unknown"  # named by no signature: the probe decides
    probed = probe_upload(camcorder["raw.h264"], max_pixels=MEDIA.max_pixels)
    assert (probed.kind, probed.width, probed.height) == ("video", 320, 240)


def test_what_pyav_cannot_read_as_video_is_still_refused(tmp_path: Path) -> None:
    noise = tmp_path / "noise.bin"
    noise.write_bytes(np.random.default_rng(7).bytes(50_000))
    with pytest.raises(UnsupportedMedia) as refused:
        probe_upload(noise, max_pixels=MEDIA.max_pixels)
    assert refused.value.reason == "not_media"
    assert "application/octet-stream" in str(refused.value)


def chunks(path: Path) -> Iterator[bytes]:
    yield path.read_bytes()


def test_camcorder_video_plays_in_the_browser_deinterlaced(
    engine: Engine, store: ObjectStore, clock: FakeClock, camcorder: dict[str, Path], tmp_path: Path
) -> None:
    album_id = album(engine, clock)
    ids = {}
    for name, path in camcorder.items():
        # A stream (as over HTTP) for the MTS: intake probes a local copy.
        source: Path | Iterator[bytes] = chunks(path) if name == "00001.MTS" else path
        ids[name] = accept_media(
            engine,
            store,
            clock,
            source,
            album_id=album_id,
            owner="ann",
            original_name=name,
            max_pixels=MEDIA.max_pixels,
        )
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        for name, item_id in ids.items():
            view = item_view(conn, item_id)
            assert view["done"], (name, view["halt_error"])
            roles = view["roles"]
            assert {"original", "poster", "thumb", "playback"} <= set(roles), name
            assert roles["playback"]["mime_type"] == "video/mp4"
            assert roles["playback"]["duration"] == pytest.approx(1.0, abs=0.1), name
            notes = conn.execute(
                select(record_events.c.outcome_text).where(
                    record_events.c.domain == "media", record_events.c.record_id == item_id
                )
            ).scalars()
            deinterlaced = any("deinterlaced" in (n or "") for n in notes)
            assert deinterlaced == (name in ("00001.MTS", "VTS_01_1.VOB")), name
            playback = tmp_path / f"{item_id}.mp4"
            playback.write_bytes(stored_bytes(store, roles["playback"]["key"]))
            with av.open(str(playback)) as played:
                stream = played.streams.video[0]
                assert stream.codec_context.name == "h264"
                frames = list(played.decode(stream))
                assert len(frames) == 25, name  # the deinterlacer's held-back frame comes out
                assert not any(f.interlaced_frame for f in frames), name
        original = queries.objects_of(conn, ids["00001.MTS"])
        assert {r["role"]: r["mime_type"] for r in original}["original"] == "video/mp2t"
