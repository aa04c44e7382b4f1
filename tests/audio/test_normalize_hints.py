"""What normalize tells people about bytes it cannot read, and how it cleans up after itself."""

from __future__ import annotations

import gc
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.audio.normalize import normalize_audio
from conveyor.errors import MediaError
from conveyor.objects.sniff import looks_like_pcm

AUDIO = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "audio"


@pytest.fixture
def unraisable() -> Iterator[list[Any]]:
    """Objects whose finaliser raised ("Exception ignored in ...") while the test ran."""
    seen: list[Any] = []
    previous = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        yield seen
    finally:
        gc.collect()
        sys.unraisablehook = previous


def test_headerless_pcm_halts_with_the_raw_pcm_hint(tmp_path: Path) -> None:
    src = tmp_path / "note"
    src.write_bytes((AUDIO / "goforward.raw").read_bytes())
    with pytest.raises(MediaError) as caught:
        normalize_audio(src, tmp_path / "out.wav")
    assert caught.value.reason == "not_audio"
    assert "--raw-pcm" in caught.value.message and "raw_pcm=true" in caught.value.message
    assert not (tmp_path / "out.wav").exists()


def test_bytes_that_are_not_pcm_get_no_hint(tmp_path: Path) -> None:
    src = tmp_path / "noise"
    src.write_bytes(bytes((i * 7919) % 251 for i in range(20000)))
    with pytest.raises(MediaError) as caught:
        normalize_audio(src, tmp_path / "out.wav")
    assert caught.value.reason == "not_audio"
    assert "raw" not in caught.value.message.lower()


def test_pcm_detection_tells_samples_from_media_and_noise() -> None:
    assert looks_like_pcm((AUDIO / "goforward.raw").read_bytes()[:4096])
    assert looks_like_pcm(bytes(4096))  # digital silence
    assert looks_like_pcm((AUDIO / "jfk.wav").read_bytes()[20000:24096])
    assert not looks_like_pcm(bytes((i * 7919) % 251 for i in range(4096)))
    assert not looks_like_pcm((AUDIO / "jfk.mp3").read_bytes()[:4096])
    assert not looks_like_pcm(b"\x01\x02" * 10)  # too short to judge


@pytest.mark.parametrize(
    "content",
    [
        b"<!doctype html><html><body>x</body></html>" * 50,
        b"%PDF-1.4\n" + bytes(2000),
        b"\x89PNG\r\n\x1a\n" + bytes(2000),
        "текст".encode() * 200,
    ],
    ids=["html", "pdf", "png", "text"],
)
def test_raw_pcm_that_is_a_known_non_audio_format_halts(tmp_path: Path, content: bytes) -> None:
    src = tmp_path / "upload"
    src.write_bytes(content)
    with pytest.raises(MediaError) as caught:
        normalize_audio(src, tmp_path / "out.wav", raw_pcm=True)
    assert caught.value.reason == "not_audio"
    assert "not headerless PCM" in caught.value.message


def test_a_decode_failure_closes_the_wav_writer(tmp_path: Path, unraisable: list[Any]) -> None:
    # A WAV whose format tag says IMA ADPCM over PCM data: it opens, then decoding fails
    # before a single sample; the writer used to be left for the garbage collector, which
    # closed it after its file ("Exception ignored ... write to closed file").
    wav = bytearray((AUDIO / "jfk.wav").read_bytes()[:2000])
    wav[20:22] = struct.pack("<H", 0x11)
    src = tmp_path / "adpcm.wav"
    src.write_bytes(bytes(wav))
    with pytest.raises(MediaError) as caught:
        normalize_audio(src, tmp_path / "out.wav")
    assert caught.value.reason == "undecodable"
    gc.collect()
    assert unraisable == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adpcm.wav"]
