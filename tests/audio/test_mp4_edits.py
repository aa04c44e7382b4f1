"""plain_sound_edits: when FFmpeg's simple edit-list handling gives the same samples as its
default, so normalize can spare a long recording's second sample index. Real files only: corpus
MP4/MOV files and AAC files written with PyAV, some with their edit list rewritten."""

from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from conveyor.audio.mp4_edits import plain_sound_edits
from conveyor.audio.normalize import TARGET_SAMPLE_RATE, normalize_audio
from tests.support.needs import need_corpus

CORPUS = need_corpus(module=True)
MEDIA = need_corpus(CORPUS / "media", module=True)
AUDIO = need_corpus(CORPUS / "audio", module=True)


def write_aac(path: Path, *, seconds: float, options: dict[str, str] | None = None) -> Path:
    """A 48 kHz mono AAC M4A of a 440 Hz tone (the encoder's priming makes an edit list)."""
    rate = 48_000
    with av.open(str(path), "w", format="ipod", options=options or {}) as out:
        stream = out.add_stream("aac", rate=rate, layout="mono")
        assert isinstance(stream, av.AudioStream)
        total = round(seconds * rate)
        for start in range(0, total, rate):
            n = min(rate, total - start)
            tone = 0.5 * np.sin(2 * np.pi * 440.0 * (start + np.arange(n)) / rate)
            frame = av.AudioFrame.from_ndarray(
                tone.astype(np.float32)[np.newaxis, :], format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def edit_list(path: Path) -> tuple[int, int, int]:
    """(offset of the first entry, version, entry count) of the file's one ``elst`` box."""
    data = path.read_bytes()
    at = data.index(b"elst")
    version = data[at + 4]
    (count,) = struct.unpack(">I", data[at + 8 : at + 12])
    return at + 12, version, count


def set_first_edit(path: Path, *, segment: int) -> None:
    """Rewrite the segment duration (movie time scale) of the first edit."""
    data = bytearray(path.read_bytes())
    entry, version, _ = edit_list(path)
    struct.pack_into(">Q" if version == 1 else ">I", data, entry, segment)
    path.write_bytes(bytes(data))


def default_decode(path: Path) -> np.ndarray:
    """16 kHz mono s16 samples as FFmpeg's default edit-list handling gives them."""
    chunks = []
    with av.open(str(path)) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=TARGET_SAMPLE_RATE)
        for frame in container.decode(audio=0):
            chunks += [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
        chunks += [f.to_ndarray().reshape(-1) for f in resampler.resample(None)]
    return np.concatenate(chunks)


def wav_samples(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])


@pytest.mark.parametrize(
    "path",
    [AUDIO / "jfk.m4a", MEDIA / "moviepy__fire2.mp4", MEDIA / "file-type__fixture.m4a"],
    ids=lambda p: p.name,
)
def test_corpus_files_with_priming_or_no_edits_are_plain(path: Path) -> None:
    assert plain_sound_edits(path)


def test_live_photo_whose_sound_edit_cuts_the_track_is_not_plain() -> None:
    # Its sound track holds 2.07 s; the edit shows 1.23 s of it.
    assert not plain_sound_edits(MEDIA / "lychee__train.mov")


def test_plain_file_normalizes_to_the_samples_of_the_default_handling(tmp_path: Path) -> None:
    src = write_aac(tmp_path / "note.m4a", seconds=12.5)
    _, _, count = edit_list(src)
    assert count == 1 and plain_sound_edits(src)

    normalize_audio(src, tmp_path / "out.wav")

    assert np.array_equal(wav_samples(tmp_path / "out.wav"), default_decode(src))


def test_edit_ending_before_the_last_frame_is_honoured(tmp_path: Path) -> None:
    src = write_aac(tmp_path / "note.m4a", seconds=10.0)
    set_first_edit(src, segment=4000)  # the ipod muxer's movie time scale is 1/1000 s
    assert not plain_sound_edits(src)

    result = normalize_audio(src, tmp_path / "out.wav")

    assert result.duration == pytest.approx(4.0, abs=0.03)  # whole AAC frames are kept
    assert np.array_equal(wav_samples(tmp_path / "out.wav"), default_decode(src))


def test_edit_ending_inside_the_last_frame_is_plain(tmp_path: Path) -> None:
    # A movie time scale in milliseconds rounds the edit's end down by a fraction of a frame.
    src = write_aac(tmp_path / "note.m4a", seconds=10.0)
    entry, version, _ = edit_list(src)
    segment = struct.unpack_from(">Q" if version == 1 else ">I", src.read_bytes(), entry)[0]
    # 10 ms short of the end (1/1000 s units), inside the last frame (768 samples, 16 ms).
    set_first_edit(src, segment=segment - 10)
    assert plain_sound_edits(src)

    normalize_audio(src, tmp_path / "out.wav")

    assert np.array_equal(wav_samples(tmp_path / "out.wav"), default_decode(src))


def test_fragmented_mp4_is_not_plain(tmp_path: Path) -> None:
    fragments = {"movflags": "empty_moov+frag_keyframe", "frag_duration": "500000"}
    src = write_aac(tmp_path / "frag.m4a", seconds=3.0, options=fragments)
    assert b"moof" in src.read_bytes()
    assert not plain_sound_edits(src)


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x00\x00\x08moov", b"\x00\x00\x00\x20ftypisom" + b"\xff" * 40, b"\x00" * 64],
    ids=["empty", "truncated moov", "box larger than the file", "zeros"],
)
def test_unreadable_boxes_are_not_plain(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.mp4"
    path.write_bytes(content)
    assert not plain_sound_edits(path)


def test_truncated_real_file_is_not_plain(tmp_path: Path) -> None:
    src = write_aac(tmp_path / "note.m4a", seconds=3.0, options={"movflags": "+faststart"})
    data = src.read_bytes()
    moov = data.index(b"moov")
    cut = tmp_path / "cut.m4a"
    cut.write_bytes(data[: moov + 200])  # the moov box claims more than is there
    assert not plain_sound_edits(cut)
