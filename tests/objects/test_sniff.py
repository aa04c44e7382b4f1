"""Content sniffing on the shared corpus (real files, referenced in place) and on files made with
PyAV or written byte by byte for formats the corpus lacks."""

from __future__ import annotations

import hashlib
import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from conveyor.objects.sniff import (
    SNIFF_BYTES,
    Sniffed,
    container_signature,
    sniff,
    sniff_bytes,
)
from tests.support.needs import need_corpus

CORPUS = need_corpus(module=True)

JPEG = Sniffed("image/jpeg", "image")
PNG = Sniffed("image/png", "image")
GIF = Sniffed("image/gif", "image")
WEBP = Sniffed("image/webp", "image")
AVIF = Sniffed("image/avif", "image")
WAV = Sniffed("audio/wav", "audio")
TEXT = Sniffed("text/plain", "unknown")
UNKNOWN = Sniffed("application/octet-stream", "unknown")

# Every file of both corpus folders, with what its content is (names are not evidence).
EXPECTED: dict[str, Sniffed] = {
    "audio/MANIFEST.md": TEXT,
    "audio/LDC93S1.flac": Sniffed("audio/flac", "audio"),
    "audio/LDC93S1.opus": Sniffed("audio/ogg", "audio"),
    "audio/LDC93S1_44k_stereo.wav": WAV,
    "audio/LDC93S1_8k_mono.wav": WAV,
    "audio/LDC93S1_vorbis_8k.ogg": Sniffed("audio/ogg", "audio"),
    "audio/cards_005.wav": WAV,
    # Broken WAVs are still WAVs by content; decoding them is normalize's business.
    "audio/corrupt_awful_samplerate.wav": WAV,
    "audio/corrupt_bad_header.wav": WAV,
    "audio/corrupt_evil_chunks.wav": WAV,
    "audio/goforward.raw": UNKNOWN,
    "audio/header_only_null.wav": WAV,
    "audio/jfk.m4a": Sniffed("audio/mp4", "audio"),
    "audio/jfk.mp3": Sniffed("audio/mpeg", "audio"),
    "audio/jfk.wav": WAV,
    "audio/noise_no_speech_10s.wav": WAV,
    "audio/not_audio_text.wav": TEXT,
    "audio/ru_deepspeech.wav": WAV,
    "audio/ru_neural_networks.wav": WAV,
    "audio/sense_and_sensibility_0880.wav": WAV,
    "audio/silence_1s.wav": WAV,
    "audio/stereo_two_speakers.wav": WAV,
    "media/MANIFEST.md": TEXT,
    "media/exif-samples__Canon_40D.jpg": JPEG,
    "media/exif-samples__DSCN0010.jpg": JPEG,
    **{f"media/exif-samples__landscape_{i}.jpg": JPEG for i in range(1, 9)},
    "media/file-type__fixture-json.webp": TEXT,
    "media/file-type__fixture.m4a": Sniffed("audio/mp4", "audio"),
    "media/file-type__fixture.mov": Sniffed("video/quicktime", "video"),
    "media/immich-test-assets__10bit-HDR-P3-nclx.avif": AVIF,
    "media/immich-test-assets__IMG_2682.heic": Sniffed("image/heic", "image"),
    "media/lychee__mongolia": JPEG,
    "media/lychee__train.mov": Sniffed("video/quicktime", "video"),
    "media/moviepy__fire2.mp4": Sniffed("video/mp4", "video"),
    "media/moviepy__result.webm": UNKNOWN,
    "media/pillow__apng_mode_16bit.png": PNG,
    "media/pillow__app13-multiple.jpg": JPEG,
    "media/pillow__avif_rot1mir0.avif": AVIF,
    "media/pillow__avif_star.avifs": AVIF,
    "media/pillow__decompression_bomb.gif": GIF,
    "media/pillow__hopper_orientation_6.webp": WEBP,
    "media/pillow__i_trns.png": PNG,
    "media/pillow__iss634.gif": GIF,
    "media/pillow__iss634.webp": WEBP,
    "media/pillow__pil_sample_cmyk.jpg": JPEG,
    "media/pillow__transparent.png": PNG,
    "media/pillow__truncated_jpeg.jpg": JPEG,
}


def test_expectations_cover_every_corpus_file() -> None:
    present = {
        f"{folder}/{p.name}"
        for folder in ("audio", "media")
        for p in (CORPUS / folder).iterdir()
        if p.is_file()
    }
    assert present == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_is_identified_by_content(name: str) -> None:
    path = CORPUS / name
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert sniff(path) == EXPECTED[name]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_zero_byte_file_is_unknown(tmp_path: Path) -> None:
    empty = tmp_path / "clip.webm"
    empty.write_bytes(b"")
    assert sniff(empty) == UNKNOWN


def test_extension_is_ignored(tmp_path: Path) -> None:
    disguised = tmp_path / "photo.jpg"
    disguised.write_bytes((CORPUS / "audio" / "jfk.wav").read_bytes())
    assert sniff(disguised) == WAV


def test_result_is_frozen() -> None:
    with pytest.raises(AttributeError):
        WAV.kind = "video"  # type: ignore[misc]


# --- containers made with PyAV ----------------------------------------------------------------


def _write_media(
    path: Path,
    fmt: str,
    audio_codec: str | None,
    video_codec: str | None = None,
    rate: int = 16000,
    options: dict[str, str] | None = None,
) -> Path:
    """Write 0.5 s of tone (and a few black frames) with PyAV."""
    # All streams must exist before the first mux writes the header (else PyAV crashes).
    with av.open(str(path), "w", format=fmt, options=options or {}) as out:
        vstream: av.VideoStream | None = None
        astream: av.AudioStream | None = None
        if video_codec is not None:
            added = out.add_stream(video_codec, rate=10)
            assert isinstance(added, av.VideoStream)
            vstream = added
            vstream.width, vstream.height, vstream.pix_fmt = 64, 48, "yuv420p"
        if audio_codec is not None:
            added_audio = out.add_stream(audio_codec, rate=rate, layout="mono")
            assert isinstance(added_audio, av.AudioStream)
            astream = added_audio
        if vstream is not None:
            for i in range(5):
                image = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), "rgb24")
                image.pts = i
                out.mux(vstream.encode(image))
            out.mux(vstream.encode(None))
        if astream is not None:
            t = np.arange(rate // 2) / rate
            tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            sound = av.AudioFrame.from_ndarray(tone.reshape(1, -1), format="flt", layout="mono")
            sound.sample_rate, sound.pts, sound.time_base = rate, 0, Fraction(1, rate)
            out.mux(astream.encode(sound))
            out.mux(astream.encode(None))
    return path


@pytest.mark.parametrize(
    ("fmt", "audio_codec", "video_codec", "rate", "options", "expected"),
    [
        ("webm", "libopus", "libvpx", 48000, None, Sniffed("video/webm", "video")),
        ("matroska", "flac", None, 16000, None, Sniffed("video/x-matroska", "video")),
        ("avi", "pcm_s16le", "mpeg4", 16000, None, Sniffed("video/x-msvideo", "video")),
        ("mp4", "aac", "mpeg4", 16000, None, Sniffed("video/mp4", "video")),
        ("mov", "aac", "mpeg4", 16000, None, Sniffed("video/quicktime", "video")),
        ("3gp", "aac", "mpeg4", 16000, None, Sniffed("video/3gpp", "video")),
        ("ipod", "aac", None, 16000, None, Sniffed("audio/mp4", "audio")),
        ("asf", "pcm_s16le", None, 16000, None, Sniffed("video/x-ms-asf", "video")),
        ("ogg", "libopus", None, 48000, None, Sniffed("audio/ogg", "audio")),
        ("ogg", "flac", None, 16000, None, Sniffed("audio/ogg", "audio")),
        ("flac", "flac", None, 16000, None, Sniffed("audio/flac", "audio")),
        ("wav", "pcm_s16le", None, 16000, None, WAV),
        ("aiff", "pcm_s16be", None, 16000, None, Sniffed("audio/aiff", "audio")),
        ("caf", "pcm_s16le", None, 16000, None, Sniffed("audio/x-caf", "audio")),
        ("adts", "aac", None, 16000, None, Sniffed("audio/aac", "audio")),
        ("amr", "libopencore_amrnb", None, 8000, None, Sniffed("audio/amr", "audio")),
        ("mp3", "libmp3lame", None, 16000, None, Sniffed("audio/mpeg", "audio")),
        # Without an ID3 tag the MP3 must be recognised from two consecutive frame headers.
        (
            "mp3",
            "libmp3lame",
            None,
            44100,
            {"id3v2_version": "0", "write_xing": "0"},
            Sniffed("audio/mpeg", "audio"),
        ),
    ],
)
def test_container_written_by_pyav_is_identified(
    tmp_path: Path,
    fmt: str,
    audio_codec: str | None,
    video_codec: str | None,
    rate: int,
    options: dict[str, str] | None,
    expected: Sniffed,
) -> None:
    path = _write_media(tmp_path / "blob", fmt, audio_codec, video_codec, rate, options)
    assert sniff(path) == expected
    # Each is also refused when an upload claims it is headerless PCM.
    signature = container_signature(path.read_bytes()[:SNIFF_BYTES])
    assert signature is not None and signature[0] == expected


def test_mp3_without_id3_starts_with_a_frame_header(tmp_path: Path) -> None:
    path = _write_media(
        tmp_path / "x", "mp3", "libmp3lame", rate=44100, options={"id3v2_version": "0"}
    )
    assert path.read_bytes()[:1] == b"\xff"  # guards the parametrized case above


# --- hand-made headers ------------------------------------------------------------------------


def _ftyp(major: bytes, *compatible: bytes) -> bytes:
    body = major + b"\x00\x00\x00\x00" + b"".join(compatible)
    return struct.pack(">I", 8 + len(body)) + b"ftyp" + body + b"\x00\x00\x00\x08free"


def _ogg_bos(packet: bytes) -> bytes:
    # Capture pattern, version 0, BOS flag, granule, serial, sequence, CRC (unchecked), 1 segment.
    return b"OggS\x00\x02" + bytes(20) + bytes([1, len(packet)]) + packet


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"II*\x00\x08\x00\x00\x00", Sniffed("image/tiff", "image")),
        (b"MM\x00*\x00\x00\x00\x08", Sniffed("image/tiff", "image")),
        (b"BM" + bytes(12) + struct.pack("<I", 40) + bytes(40), Sniffed("image/bmp", "image")),
        (b"BMW is a car brand.", TEXT),
        (_ftyp(b"mif1", b"mif1", b"heic"), Sniffed("image/heic", "image")),
        (_ftyp(b"msf1", b"msf1", b"hevc"), Sniffed("image/heic", "image")),
        (_ftyp(b"mif1", b"mif1", b"miaf"), Sniffed("image/heif", "image")),
        (_ftyp(b"avis", b"avis", b"msf1"), AVIF),
        (_ftyp(b"M4B ", b"M4B ", b"mp42"), Sniffed("audio/mp4", "audio")),
        (_ftyp(b"qt  ", b"qt  "), Sniffed("video/quicktime", "video")),
        (_ftyp(b"isom", b"isom", b"avc1"), Sniffed("video/mp4", "video")),
        (b"\x00\x00\x00\x10moov" + bytes(8), Sniffed("video/quicktime", "video")),
        (b"RIFF\x00\x00\x00\x00AVI LIST", Sniffed("video/x-msvideo", "video")),
        (b"RF64\xff\xff\xff\xffWAVEds64", WAV),
        (b"#!AMR-WB\n" + bytes(10), Sniffed("audio/amr-wb", "audio")),
        (_ogg_bos(b"\x80theora" + bytes(34)), Sniffed("video/ogg", "video")),
        (
            _ogg_bos(b"fishead\x00" + bytes(56)) + _ogg_bos(b"OpusHead" + bytes(11)),
            Sniffed("audio/ogg", "audio"),
        ),
        (
            _ogg_bos(b"OpusHead" + bytes(11)) + _ogg_bos(b"\x80theora" + bytes(34)),
            Sniffed("video/ogg", "video"),
        ),
        (_ogg_bos(b"unknown codec"), Sniffed("application/ogg", "unknown")),
        (b"\x1a\x45\xdf\xa3\x84\x42\x82\x81\x78", Sniffed("video/x-matroska", "video")),
        ("Привет, мир!\n".encode(), TEXT),
        ("🎵".encode()[:3], TEXT),  # a character cut by the read limit is still text
        (b"\xff\xfeH\x00i\x00", TEXT),
        (b"RIFF", TEXT),  # four ASCII letters are text, not a WAV
        (b"RIFF\x10\x00\x00\x00", UNKNOWN),
        (b"\x00" * 64, UNKNOWN),
        (b"\xff\xff\xff\xff" * 64, UNKNOWN),  # PCM at -1: all sync bits, invalid bitrate
        (b"\xff\xfb\x90\x00" + bytes(100), UNKNOWN),  # one MP3 header, no second frame
        (bytes(range(256)) * 4, UNKNOWN),
    ],
)
def test_header_is_identified(head: bytes, expected: Sniffed) -> None:
    assert sniff_bytes(head) == expected


def test_id3_tag_in_front_of_flac_is_skipped(tmp_path: Path) -> None:
    flac = _write_media(tmp_path / "plain.flac", "flac", "flac")
    tag_body = b"TIT2" + struct.pack(">I", 5000) + b"\x00\x00" + bytes(5000)  # beyond 4 KiB
    size = len(tag_body)
    syncsafe = bytes([(size >> 21) & 0x7F, (size >> 14) & 0x7F, (size >> 7) & 0x7F, size & 0x7F])
    tagged = tmp_path / "tagged.mp3"
    tagged.write_bytes(b"ID3\x04\x00\x00" + syncsafe + tag_body + flac.read_bytes())
    assert len(tag_body) > SNIFF_BYTES
    assert sniff(tagged) == Sniffed("audio/flac", "audio")


def test_large_text_file_is_text(tmp_path: Path) -> None:
    big = tmp_path / "notes.wav"
    big.write_text("hello world\n" * 10_000, encoding="utf-8")
    assert sniff(big) == TEXT


# --- content declared headerless PCM ------------------------------------------------------------


@pytest.mark.parametrize(
    "name", sorted(n for n, s in EXPECTED.items() if s.kind in ("audio", "video"))
)
def test_corpus_audio_and_video_have_a_complete_container_signature(name: str) -> None:
    signature = container_signature((CORPUS / name).read_bytes()[:SNIFF_BYTES])
    assert signature is not None and signature[0] == EXPECTED[name]


def test_headerless_pcm_has_no_container_signature() -> None:
    assert (
        container_signature((CORPUS / "audio" / "goforward.raw").read_bytes()[:SNIFF_BYTES]) is None
    )


@pytest.mark.parametrize(
    "start",
    [
        b"ID3",  # the rest of the samples do not make a valid ID3v2 header
        b"ID3\x04\x00\x00\x00\x00\x00\xff",  # size byte not syncsafe
        b"\xff\xfb\x90\x00",  # one MPEG frame header, not followed by more
        b"fLaC",  # no STREAMINFO block after the magic
        b"\x1a\x45\xdf\xa3",  # EBML magic without a DocType
        b"\x00\x00\x10\x00free",  # a QuickTime atom name without ftyp
    ],
)
def test_pcm_starting_with_part_of_a_signature_is_not_a_container(start: bytes) -> None:
    # Samples that happen to begin like a header are still accepted as raw PCM.
    pcm = (CORPUS / "audio" / "goforward.raw").read_bytes()[:SNIFF_BYTES]
    assert container_signature(start + pcm[len(start) :]) is None
