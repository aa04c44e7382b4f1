"""Video probe, poster and playback on the real corpus and on videos made here (NORMS M1-M3, M8).

No mocks: every check decodes real files with PyAV. Synthetic videos are written with PyAV into
``tmp_path`` so remux, scaling, rotation and VFR cases have known ground truth.
"""

from __future__ import annotations

import itertools
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, TypedDict

import av
import numpy as np
import pytest

from conveyor.errors import MediaError
from conveyor.media.video import Playback, VideoInfo, extract_poster, make_playback, probe_video
from tests.support.needs import MEDIA_CORPUS, need_corpus

CORPUS = need_corpus(MEDIA_CORPUS, module=True)
FIRE2 = CORPUS / "moviepy__fire2.mp4"
TRAIN = CORPUS / "lychee__train.mov"
FIXTURE_MOV = CORPUS / "file-type__fixture.mov"
M4A = CORPUS / "file-type__fixture.m4a"
EMPTY_WEBM = CORPUS / "moviepy__result.webm"
JSON_WEBP = CORPUS / "file-type__fixture-json.webp"


class Limits(TypedDict):
    max_height: int
    max_bitrate: int
    crf: int
    audio_bitrate: int


def limits(*, max_height: int = 1080, max_bitrate: int = 5_000_000) -> Limits:
    """The ``make_playback`` keywords, at the ``MediaSettings`` defaults unless overridden."""
    return Limits(max_height=max_height, max_bitrate=max_bitrate, crf=23, audio_bitrate=128_000)


@dataclass(frozen=True)
class Expected:
    width: int
    height: int
    rotation: int
    duration: float
    has_audio: bool
    audio_codec: str | None
    mime_type: str
    pix_fmt: str


EXPECTED = {
    FIRE2: Expected(1280, 720, 180, 2.38, True, "aac", "video/mp4", "yuv420p"),
    TRAIN: Expected(1440, 1080, 0, 1.23, True, "pcm_s16le", "video/quicktime", "yuvj420p"),
    FIXTURE_MOV: Expected(268, 156, 0, 0.099, False, None, "video/quicktime", "yuv420p"),
}
VIDEOS = list(EXPECTED)


# --------------------------------------------------------------------------- helpers


def top_level_boxes(path: Path) -> list[str]:
    """Types of the top-level ISO-BMFF boxes, in file order."""
    boxes: list[str] = []
    data = path.read_bytes()
    offset = 0
    while offset + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if size == 1:
            (size,) = struct.unpack(">Q", data[offset + 8 : offset + 16])
        elif size == 0:
            size = len(data) - offset
        boxes.append(kind.decode("latin-1"))
        assert size >= 8
        offset += size
    return boxes


def luma_frames(path: Path) -> list[np.ndarray[Any, Any]]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="gray").astype(np.float32) for f in container.decode(video=0)]


def frame_times(path: Path) -> list[float]:
    with av.open(str(path)) as container:
        return [float(f.time) for f in container.decode(video=0)]


def stream_seconds(stream: Any) -> float:
    return float(stream.duration * stream.time_base)


def pattern(width: int, height: int, index: int) -> np.ndarray[Any, Any]:
    """An RGB frame whose orientation is obvious: a white block in the top-left quadrant."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.zeros((height, width, 3), dtype=np.uint8)
    rgb[..., 0] = (x * 255 // max(1, width - 1)).astype(np.uint8)
    rgb[..., 1] = (y * 255 // max(1, height - 1)).astype(np.uint8)
    rgb[..., 2] = (index * 7) % 256
    rgb[: height // 4, : width // 4] = 255
    return rgb


def make_video(
    path: Path,
    *,
    width: int,
    height: int,
    seconds: float,
    fps: int = 25,
    audio: bool = True,
    rotation_ccw: int | None = None,
    gaps: list[int] | None = None,
    bit_rate: int = 1_000_000,
) -> None:
    """Write an H.264 (+ stereo AAC) MP4. ``gaps`` = frame durations in 1/1000 s (VFR)."""
    with av.open(str(path), "w", format="mp4") as out:
        video = out.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.codec_context.time_base = Fraction(1, 1000)
        video.codec_context.options = {"preset": "ultrafast", "profile": "high"}
        video.bit_rate = bit_rate
        if rotation_ccw is not None:
            video.set_display_rotation(rotation_ccw)
        sound = None
        if audio:
            sound = out.add_stream("aac", rate=48_000)
            sound.layout = "stereo"
        pts, index = 0, 0
        while pts < seconds * 1000:
            frame = av.VideoFrame.from_ndarray(pattern(width, height, index), format="rgb24")
            frame = frame.reformat(format="yuv420p")
            frame.pts, frame.time_base = pts, Fraction(1, 1000)
            out.mux(video.encode(frame))
            pts += gaps[index % len(gaps)] if gaps else 1000 // fps
            index += 1
        out.mux(video.encode(None))
        if sound is not None:
            total = round(seconds * 48_000)
            for start in range(0, total, 1024):
                n = min(1024, total - start)
                t = (np.arange(start, start + n) / 48_000).astype(np.float32)
                tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
                chunk = av.AudioFrame.from_ndarray(
                    np.stack([tone, tone]), format="fltp", layout="stereo"
                )
                chunk.sample_rate, chunk.pts = 48_000, start
                out.mux(sound.encode(chunk))
            out.mux(sound.encode(None))


def assert_playable(pb: Playback, info: VideoInfo, *, max_height: int) -> None:
    """Decodes back as H.264 yuv420p (+ AAC), even, bounded, upright, faststart, in sync."""
    assert pb.path.is_file() and pb.size == pb.path.stat().st_size
    boxes = top_level_boxes(pb.path)
    assert boxes.index("moov") < boxes.index("mdat"), boxes
    with av.open(str(pb.path)) as container:
        video = container.streams.video[0]
        assert video.codec_context.name == "h264"
        assert video.codec_context.pix_fmt == "yuv420p"
        assert video.codec_context.width == pb.width and video.codec_context.height == pb.height
        assert pb.width % 2 == 0 and pb.height % 2 == 0
        assert pb.height <= max_height
        assert abs(stream_seconds(video) - info.duration) < 0.1
        assert abs(pb.duration - info.duration) < 0.1
        if info.has_audio:
            assert len(container.streams.audio) == 1
            audio = container.streams.audio[0]
            assert audio.codec_context.name == "aac"
            assert audio.codec_context.layout.nb_channels <= 2
            assert abs(stream_seconds(audio) - info.duration) < 0.1
        else:
            assert len(container.streams.audio) == 0
        assert len(container.streams) == 1 + int(info.has_audio)  # data tracks dropped
        frames = list(container.decode(video))
    assert frames, "playback has no frames"
    assert all((f.rotation or 0) == 0 for f in frames)  # physically upright: no matrix
    aspect_in = info.width / info.height
    assert abs(pb.width / pb.height - aspect_in) < 0.02


# --------------------------------------------------------------------------- probe


@pytest.mark.parametrize("src", VIDEOS, ids=lambda p: p.name)
def test_m1_probe_corpus_video(src: Path) -> None:
    info = probe_video(src)
    want = EXPECTED[src]
    assert (info.width, info.height, info.rotation) == (want.width, want.height, want.rotation)
    assert info.duration == pytest.approx(want.duration, abs=0.02)
    assert info.has_audio is want.has_audio
    assert info.audio_codec == want.audio_codec
    assert info.video_codec == "h264"
    assert info.mime_type == want.mime_type
    assert info.pix_fmt == want.pix_fmt
    assert "mp4" in info.container.split(",")
    assert info.bit_rate is not None and info.bit_rate > 0
    assert info.captured_at is not None and info.captured_at.tzinfo is not None


def test_m1_probe_capture_time_from_apple_creationdate() -> None:
    # com.apple.quicktime.creationdate 2021-04-10T11:43:59+0100 wins over creation_time.
    assert probe_video(TRAIN).captured_at == datetime(2021, 4, 10, 10, 43, 59, tzinfo=UTC)
    assert probe_video(FIRE2).captured_at == datetime(2017, 1, 5, 18, 32, 43, tzinfo=UTC)


def test_m1_audio_only_mp4_is_not_video() -> None:
    with pytest.raises(MediaError) as err:
        probe_video(M4A)
    assert err.value.reason == "not_video"


@pytest.mark.parametrize("src", [EMPTY_WEBM, JSON_WEBP], ids=lambda p: p.name)
def test_m1_empty_or_fake_file_is_undecodable(src: Path) -> None:
    with pytest.raises(MediaError) as err:
        probe_video(src)
    assert err.value.reason == "undecodable"


def test_m1_text_file_is_undecodable(tmp_path: Path) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video, just some words\n" * 20)
    with pytest.raises(MediaError) as err:
        probe_video(text)
    assert err.value.reason == "undecodable"


def test_m1_still_image_is_not_video() -> None:
    with pytest.raises(MediaError) as err:
        probe_video(CORPUS / "exif-samples__landscape_1.jpg")
    assert err.value.reason == "not_video"


# --------------------------------------------------------------------------- poster


@pytest.mark.parametrize("src", VIDEOS, ids=lambda p: p.name)
def test_m2_poster_upright_and_not_black(src: Path, tmp_path: Path) -> None:
    info = probe_video(src)
    dst = tmp_path / "poster.jpg"
    size = extract_poster(src, dst, info)
    assert size == (info.width, info.height)
    assert dst.read_bytes()[:3] == b"\xff\xd8\xff"
    assert [p.name for p in tmp_path.iterdir()] == ["poster.jpg"]  # no temp file left
    with av.open(str(dst)) as container:
        frame = next(container.decode(video=0))
        assert (frame.width, frame.height) == size
        luma = frame.to_ndarray(format="gray").astype(np.float32)
    assert luma.mean() > 20 and luma.std() > 5


def test_m2_poster_of_fire2_is_turned_180(tmp_path: Path) -> None:
    info = probe_video(FIRE2)
    dst = tmp_path / "poster.jpg"
    extract_poster(FIRE2, dst, info)
    poster = luma_frames(dst)[0]
    raw = luma_frames(FIRE2)  # decoded as stored, matrix not applied
    turned = min(float(np.abs(poster - np.rot90(f, 2)).mean()) for f in raw)
    as_stored = min(float(np.abs(poster - f).mean()) for f in raw)
    assert turned < 4, turned  # JPEG error only
    assert as_stored > 3 * turned, (turned, as_stored)


def test_m2_poster_skips_black_opening(tmp_path: Path) -> None:
    src = tmp_path / "fade.mp4"
    with av.open(str(src), "w", format="mp4") as out:
        video = out.add_stream("libx264", rate=10)
        video.width, video.height, video.pix_fmt = 320, 240, "yuv420p"
        for i in range(40):  # 1 s of black, then 3 s of picture
            rgb = pattern(320, 240, i) if i >= 10 else np.zeros((240, 320, 3), np.uint8)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts = i
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
    info = probe_video(src)
    dst = tmp_path / "poster.jpg"
    extract_poster(src, dst, info)
    assert luma_frames(dst)[0].mean() > 40


def make_live_webm(path: Path, *, seconds: int = 4, fps: int = 10, black: float = 1.5) -> None:
    """A VP8 + Opus WebM written as a live recorder writes it: no duration, no cues.

    The first ``black`` seconds are black; frame ``i`` after them is :func:`pattern` ``i`` (blue
    channel ``7 i mod 256``), so a poster tells which frame it was taken from.
    """
    width, height = 160, 120
    with av.open(str(path), "w", format="webm", container_options={"live": "1"}) as out:
        video = out.add_stream("libvpx", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.bit_rate = 2_000_000
        sound = out.add_stream("libopus", rate=48_000)
        sound.layout = "mono"
        for i in range(seconds * fps):
            dark = i < black * fps
            rgb = np.zeros((height, width, 3), np.uint8) if dark else pattern(width, height, i)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        total = seconds * 48_000
        for start in range(0, total, 960):
            t = (np.arange(start, start + 960) / 48_000).astype(np.float32)
            tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[np.newaxis, :]
            chunk = av.AudioFrame.from_ndarray(tone, format="flt", layout="mono")
            chunk.sample_rate, chunk.pts = 48_000, start
            out.mux(sound.encode(chunk))
        out.mux(sound.encode(None))


def test_m1_live_webm_without_duration_is_measured_and_posters_spread_over_it(
    tmp_path: Path,
) -> None:
    src = tmp_path / "recorded.webm"
    make_live_webm(src)
    with av.open(str(src)) as container:
        assert container.duration is None  # the case: the header says nothing
        assert container.streams.video[0].duration is None
    info = probe_video(src)
    assert info.mime_type == "video/webm"
    assert info.duration == pytest.approx(4.0, abs=0.1)
    # 0 %, 10 % and 25 % fall in the black opening; 50 % (2.0 s = frame 20) is the first picture.
    dst = tmp_path / "poster.jpg"
    extract_poster(src, dst, info)
    with av.open(str(dst)) as container:
        rgb = next(container.decode(video=0)).to_ndarray(format="rgb24").astype(np.float32)
    blue = float(rgb[60:, 80:, 2].mean())  # away from the white block of pattern()
    assert blue == pytest.approx(20 * 7, abs=9), blue  # frames 19 and 21 are 7 apart
    pb = make_playback(src, tmp_path / "playback.mp4", info, **limits())
    assert_playable(pb, info, max_height=1080)


# --------------------------------------------------------------------------- playback


@pytest.fixture(scope="module")
def corpus_playbacks(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Playback]:
    folder = tmp_path_factory.mktemp("playback")
    result: dict[Path, Playback] = {}
    for src in VIDEOS:
        result[src] = make_playback(src, folder / f"{src.stem}.mp4", probe_video(src), **limits())
    return result


@pytest.mark.parametrize("src", VIDEOS, ids=lambda p: p.name)
def test_m3_playback_of_corpus_video(src: Path, corpus_playbacks: dict[Path, Playback]) -> None:
    info = probe_video(src)
    pb = corpus_playbacks[src]
    assert not pb.remuxed  # rotation, PCM audio and an edit-listed stub: all re-encoded
    assert (pb.width, pb.height) == (info.width, info.height)  # all within 1080
    assert_playable(pb, info, max_height=1080)


def test_m3_playback_of_fire2_is_turned_180(corpus_playbacks: dict[Path, Playback]) -> None:
    played = luma_frames(corpus_playbacks[FIRE2].path)
    raw = luma_frames(FIRE2)
    assert len(played) == len(raw) == 25
    turned = float(np.abs(played[12] - np.rot90(raw[12], 2)).mean())
    as_stored = float(np.abs(played[12] - raw[12]).mean())
    assert turned < 5 and as_stored > 3 * turned, (turned, as_stored)


@pytest.mark.parametrize("src", [FIRE2, TRAIN], ids=lambda p: p.name)
def test_m3_variable_frame_rate_kept(src: Path, corpus_playbacks: dict[Path, Playback]) -> None:
    source = frame_times(src)
    played = frame_times(corpus_playbacks[src].path)
    assert len(played) == len(source)
    assert max(abs(a - b) for a, b in zip(played, source, strict=True)) < 0.002


def test_m3_truncated_mov_plays_what_decodes(corpus_playbacks: dict[Path, Playback]) -> None:
    # Header: 25 frames / 0.099 s; an edit list shows only the last 5, and those are kept.
    assert len(frame_times(corpus_playbacks[FIXTURE_MOV].path)) == 5


def test_m3_scales_1080p_to_720p_with_increasing_progress(tmp_path: Path) -> None:
    src = tmp_path / "big.mp4"
    make_video(src, width=1920, height=1080, seconds=2.0, bit_rate=8_000_000)
    info = probe_video(src)
    assert (info.width, info.height, info.rotation) == (1920, 1080, 0)
    calls: list[float] = []
    settings = limits(max_height=720)
    pb = make_playback(src, tmp_path / "out.mp4", info, progress=calls.append, **settings)
    assert (pb.width, pb.height) == (1280, 720) and not pb.remuxed
    assert_playable(pb, info, max_height=720)
    assert len(calls) >= 3
    assert calls[0] == 0.0 and calls[-1] == 1.0
    assert all(0.0 <= a <= b <= 1.0 for a, b in itertools.pairwise(calls))


def test_m3_never_upscales_and_keeps_even_sides(tmp_path: Path) -> None:
    src = tmp_path / "odd.mp4"
    make_video(src, width=322, height=182, seconds=1.0, audio=False)
    info = probe_video(src)
    # 180 > 144: scaled to 144 high, odd width rounded down to even.
    pb = make_playback(src, tmp_path / "small.mp4", info, **limits(max_height=144))
    assert (pb.width, pb.height) == (254, 144)
    assert_playable(pb, info, max_height=144)
    pb = make_playback(src, tmp_path / "same.mp4", info, **limits())
    assert (pb.width, pb.height) == (322, 182)


def test_m3_rotated_portrait_is_turned_upright(tmp_path: Path) -> None:
    src = tmp_path / "portrait.mp4"
    # Stored landscape 640x360 with a matrix saying "turn 90° clockwise" (a phone held upright).
    make_video(src, width=640, height=360, seconds=1.0, rotation_ccw=-90)
    info = probe_video(src)
    assert (info.width, info.height, info.rotation) == (360, 640, 90)
    pb = make_playback(src, tmp_path / "out.mp4", info, **limits())
    assert (pb.width, pb.height) == (360, 640) and not pb.remuxed
    assert_playable(pb, info, max_height=1080)
    played = luma_frames(pb.path)[0]
    stored = luma_frames(src)[0]
    assert float(np.abs(played - np.rot90(stored, k=-1)).mean()) < 5
    # The white block of the stored top-left corner is now top-right.
    assert played[:100, -60:].mean() > 200 and played[:100, :60].mean() < 200
    poster = tmp_path / "poster.jpg"
    assert extract_poster(src, poster, info) == (360, 640)
    assert float(np.abs(luma_frames(poster)[0] - np.rot90(stored, k=-1)).mean()) < 5


def test_m3_synthetic_vfr_timestamps_survive(tmp_path: Path) -> None:
    src = tmp_path / "vfr.mp4"
    make_video(src, width=320, height=240, seconds=2.0, gaps=[40, 100, 33, 67])
    info = probe_video(src)
    pb = make_playback(src, tmp_path / "out.mp4", info, **limits(max_bitrate=100_000))
    assert not pb.remuxed
    assert_playable(pb, info, max_height=1080)
    source, played = frame_times(src), frame_times(pb.path)
    assert max(abs(a - b) for a, b in zip(played, source, strict=True)) < 0.002


def test_m3_compatible_source_is_remuxed_and_faster(tmp_path: Path) -> None:
    src = tmp_path / "ready.mp4"
    make_video(src, width=640, height=360, seconds=4.0, bit_rate=800_000)
    info = probe_video(src)
    started = time.perf_counter()
    calls: list[float] = []
    pb = make_playback(src, tmp_path / "remux.mp4", info, progress=calls.append, **limits())
    remux_seconds = time.perf_counter() - started
    assert pb.remuxed
    assert calls[0] == 0.0 and calls[-1] == 1.0
    assert_playable(pb, info, max_height=1080)
    assert len(frame_times(pb.path)) == len(frame_times(src))
    # The same file over a lower bitrate cap must be re-encoded.
    started = time.perf_counter()
    slow = make_playback(src, tmp_path / "encode.mp4", info, **limits(max_bitrate=100_000))
    encode_seconds = time.perf_counter() - started
    assert not slow.remuxed
    assert remux_seconds * 3 < encode_seconds, (remux_seconds, encode_seconds)


class Stop(Exception):
    pass


def test_m8_progress_exception_aborts_and_leaves_nothing(tmp_path: Path) -> None:
    info = probe_video(FIRE2)
    out = tmp_path / "out"
    out.mkdir()
    calls: list[float] = []

    def progress(fraction: float) -> None:
        calls.append(fraction)
        if fraction > 0.2:
            raise Stop

    with pytest.raises(Stop):
        make_playback(FIRE2, out / "playback.mp4", info, progress=progress, **limits())
    assert calls and calls[-1] < 1.0
    assert list(out.iterdir()) == []  # neither the playback nor its temp file


def test_m8_progress_exception_aborts_remux(tmp_path: Path) -> None:
    src = tmp_path / "ready.mp4"
    make_video(src, width=320, height=240, seconds=2.0, bit_rate=300_000)
    info = probe_video(src)
    out = tmp_path / "out"
    out.mkdir()

    def progress(fraction: float) -> None:
        if fraction > 0.0:
            raise Stop

    with pytest.raises(Stop):
        make_playback(src, out / "playback.mp4", info, progress=progress, **limits())
    assert list(out.iterdir()) == []
