"""normalize_audio on the shared audio corpus (referenced in place, never copied into the repo),
on two corpus videos and on files generated with PyAV. No mocks: every test decodes real bytes."""

from __future__ import annotations

import hashlib
import logging
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from conveyor.audio.normalize import (
    FLOOR_DBFS,
    REASONS,
    TARGET_SAMPLE_RATE,
    NormalizedAudio,
    normalize_audio,
)
from conveyor.errors import MediaError
from tests.support.needs import need_corpus

CORPUS = need_corpus(module=True)
AUDIO = need_corpus(CORPUS / "audio", module=True)
MEDIA = need_corpus(CORPUS / "media", module=True)

# Decoded duration in seconds from the corpus MANIFEST (decoded sample count ÷ rate).
EXPECTED_DURATION: dict[str, float] = {
    "jfk.wav": 11.00,
    "jfk.mp3": 11.00,
    "jfk.m4a": 11.005,  # the container declares 11.053 (AAC priming is not audio)
    "goforward.raw": 2.786,
    "sense_and_sensibility_0880.wav": 2.990,
    "cards_005.wav": 3.502,
    "LDC93S1.opus": 2.925,
    "LDC93S1_vorbis_8k.ogg": 2.925,
    "LDC93S1.flac": 2.925,
    "LDC93S1_8k_mono.wav": 2.925,
    "LDC93S1_44k_stereo.wav": 2.925,
    "ru_deepspeech.wav": 5.667,
    "ru_neural_networks.wav": 3.234,
    "stereo_two_speakers.wav": 5.000,
    "silence_1s.wav": 1.0,
    "noise_no_speech_10s.wav": 9.955,
}

EXPECTED_REASON: dict[str, str] = {
    "header_only_null.wav": "empty_audio",
    "corrupt_bad_header.wav": "undecodable",
    "corrupt_evil_chunks.wav": "undecodable",
    "corrupt_awful_samplerate.wav": "bad_sample_rate",
    "not_audio_text.wav": "not_audio",
}

DURATION_TOLERANCE = 0.01  # seconds; tight enough to tell jfk.m4a's 11.005 from 11.053


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def normalize(src: Path, dst: Path) -> NormalizedAudio:
    """Normalize a corpus file; the one headerless file is read as 16 kHz mono s16le."""
    return normalize_audio(src, dst, raw_pcm=src.suffix == ".raw")


def read_wav(path: Path) -> tuple[str, str, int, int, np.ndarray]:
    """Return (container, codec, rate, channels, samples) of a WAV, decoded with PyAV."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        ctx = stream.codec_context
        chunks = [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
        return (
            container.format.name,
            ctx.codec.name,
            ctx.sample_rate,
            ctx.layout.nb_channels,
            np.concatenate(chunks) if chunks else np.zeros(0, np.int16),
        )


def write_tone(
    path: Path,
    fmt: str,
    codec: str,
    *,
    seconds: float,
    rate: int,
    layout: str = "mono",
    amplitude: float = 0.5,
    options: dict[str, str] | None = None,
) -> Path:
    """Encode a 440 Hz sine with PyAV, one second at a time (the test must not hold it all);
    ``options`` go to the muxer."""
    channels = 2 if layout == "stereo" else 1
    with av.open(str(path), "w", format=fmt, options=options or {}) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        assert isinstance(stream, av.AudioStream)
        total = round(seconds * rate)
        for start in range(0, total, rate):
            n = min(rate, total - start)
            t = (start + np.arange(n)) / rate
            tone = (amplitude * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
            planes = np.tile(tone, (channels, 1))
            frame = av.AudioFrame.from_ndarray(planes, format="fltp", layout=layout)
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


# --- the corpus -------------------------------------------------------------------------------


def test_expectations_cover_every_corpus_audio_file() -> None:
    present = {p.name for p in AUDIO.iterdir() if p.is_file() and p.suffix != ".md"}
    assert present == set(EXPECTED_DURATION) | set(EXPECTED_REASON)
    assert set(EXPECTED_REASON.values()) <= REASONS


@pytest.mark.parametrize("name", sorted(EXPECTED_DURATION))
def test_corpus_clip_normalizes_to_16k_mono_s16_of_expected_duration(
    name: str, tmp_path: Path
) -> None:
    src = AUDIO / name
    before = sha256(src)
    dst = tmp_path / "out.wav"

    result = normalize(src, dst)

    assert result.duration == pytest.approx(EXPECTED_DURATION[name], abs=DURATION_TOLERANCE)
    container, codec, rate, channels, samples = read_wav(dst)
    assert (container, codec, rate, channels) == ("wav", "pcm_s16le", TARGET_SAMPLE_RATE, 1)
    assert samples.size == round(result.duration * TARGET_SAMPLE_RATE)
    assert sha256(src) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]  # no temp file left


@pytest.mark.parametrize("name", sorted(EXPECTED_REASON))
def test_broken_corpus_file_is_rejected_with_its_reason(name: str, tmp_path: Path) -> None:
    src = AUDIO / name
    before = sha256(src)
    dst = tmp_path / "out.wav"

    with pytest.raises(MediaError) as caught:
        normalize_audio(src, dst)

    assert caught.value.reason == EXPECTED_REASON[name]
    assert caught.value.message.startswith("The file ")
    assert caught.value.message.endswith(".")
    assert str(AUDIO) not in caught.value.message  # storage paths mean nothing to people
    assert sha256(src) == before
    assert list(tmp_path.iterdir()) == []  # neither dst nor a temp file


# A corrupt file must be refused, not loop on its chunks; speed belongs to python -m bench.
@pytest.mark.timeout(60)
def test_corrupt_files_are_rejected_without_hanging(tmp_path: Path) -> None:
    names = ("corrupt_evil_chunks.wav", "corrupt_bad_header.wav")
    refused = []
    for name in names:
        with pytest.raises(MediaError) as caught:
            normalize_audio(AUDIO / name, tmp_path / "out.wav")
        refused.append(caught.value.reason)
    assert refused == [EXPECTED_REASON[n] for n in names]


def test_source_properties_are_reported(tmp_path: Path) -> None:
    m4a = normalize_audio(AUDIO / "jfk.m4a", tmp_path / "a.wav")
    assert (m4a.mime_type, m4a.container, m4a.codec) == (
        "audio/mp4",
        "mov,mp4,m4a,3gp,3g2,mj2",
        "aac",
    )
    assert (m4a.sample_rate, m4a.channels) == (44100, 2)

    mp3 = normalize_audio(AUDIO / "jfk.mp3", tmp_path / "b.wav")
    assert (mp3.mime_type, mp3.container, mp3.codec) == ("audio/mpeg", "mp3", "mp3")

    opus = normalize_audio(AUDIO / "LDC93S1.opus", tmp_path / "c.wav")
    assert (opus.mime_type, opus.container, opus.codec, opus.sample_rate) == (
        "audio/ogg",
        "ogg",
        "opus",
        48000,
    )


def test_m4a_duration_counts_decoded_samples_not_the_container_header(tmp_path: Path) -> None:
    result = normalize_audio(AUDIO / "jfk.m4a", tmp_path / "out.wav")
    assert abs(result.duration - 11.005) < abs(result.duration - 11.053)


def test_digital_silence_is_flagged_silent(tmp_path: Path) -> None:
    result = normalize_audio(AUDIO / "silence_1s.wav", tmp_path / "out.wav")
    assert result.silent
    assert result.rms_dbfs == FLOOR_DBFS
    assert result.peak_dbfs == FLOOR_DBFS


def test_speech_is_not_silent(tmp_path: Path) -> None:
    result = normalize_audio(AUDIO / "jfk.wav", tmp_path / "out.wav")
    assert not result.silent
    assert -30.0 < result.rms_dbfs < result.peak_dbfs <= 0.0


def test_noise_level_matches_the_manifest(tmp_path: Path) -> None:
    # MANIFEST: "peak 1.0, −25.8 dBFS RMS"; energy alone does not call this file silent.
    result = normalize_audio(AUDIO / "noise_no_speech_10s.wav", tmp_path / "out.wav")
    assert result.rms_dbfs == pytest.approx(-25.8, abs=0.1)
    assert result.peak_dbfs == pytest.approx(0.0, abs=0.01)
    assert not result.silent


def _stereo(path: Path, left: np.ndarray, right: np.ndarray) -> Path:
    import wave

    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(2)
        sink.setsampwidth(2)
        sink.setframerate(TARGET_SAMPLE_RATE)
        sink.writeframes(np.stack([left, right], axis=1).astype("<i2").tobytes())
    return path


def test_channels_in_opposite_phase_are_heard_not_judged_silent(tmp_path: Path) -> None:
    """jfk.wav on the left and its inverse on the right cancel to digital zero when mixed: the
    loudest channel is kept alone, and the summary says so; the original is left as it was."""
    _, _, _, _, speech = read_wav(AUDIO / "jfk.wav")
    speech = np.clip(speech.astype(np.int32), -32767, 32767)
    source = _stereo(tmp_path / "antiphase.wav", speech, -speech)
    before = source.read_bytes()
    dst = tmp_path / "out.wav"
    result = normalize_audio(source, dst)
    assert result.cancelled_mix == 1 and not result.silent
    assert result.channels == 2 and result.output_channels == 1
    assert result.peak_dbfs > -10
    _, _, _, channels, samples = read_wav(dst)
    assert channels == 1 and samples.size == speech.size
    assert np.array_equal(samples, speech.astype(np.int16))
    assert source.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".apart")] == []
    # A silent stereo file stays silent; channels that do not cancel are mixed as before.
    quiet = normalize_audio(_stereo(tmp_path / "zero.wav", speech * 0, speech * 0), dst)
    assert quiet.silent and quiet.cancelled_mix is None
    same = normalize_audio(_stereo(tmp_path / "same.wav", speech, speech), dst)
    assert not same.silent and same.cancelled_mix is None


def test_stereo_is_downmixed_to_mono(tmp_path: Path) -> None:
    dst = tmp_path / "out.wav"
    result = normalize_audio(AUDIO / "stereo_two_speakers.wav", dst)
    assert result.channels == 2
    _, _, _, channels, samples = read_wav(dst)
    assert channels == 1
    assert samples.size == 5 * TARGET_SAMPLE_RATE


def test_8k_telephony_audio_is_upsampled_to_16k(tmp_path: Path) -> None:
    dst = tmp_path / "out.wav"
    result = normalize_audio(AUDIO / "LDC93S1_8k_mono.wav", dst)
    assert result.sample_rate == 8000
    _, _, rate, _, samples = read_wav(dst)
    assert rate == TARGET_SAMPLE_RATE
    assert samples.size == pytest.approx(2.925 * TARGET_SAMPLE_RATE, abs=2)


def test_44k_stereo_and_16k_mono_of_one_clip_give_the_same_duration(tmp_path: Path) -> None:
    a = normalize_audio(AUDIO / "LDC93S1_44k_stereo.wav", tmp_path / "a.wav")
    b = normalize_audio(AUDIO / "LDC93S1.flac", tmp_path / "b.wav")
    assert a.duration == pytest.approx(b.duration, abs=0.001)


# --- raw PCM ----------------------------------------------------------------------------------


def test_raw_pcm_is_read_as_16k_mono_s16le_by_default(tmp_path: Path) -> None:
    result = normalize_audio(AUDIO / "goforward.raw", tmp_path / "out.wav", raw_pcm=True)
    assert result.duration == pytest.approx(89160 / 2 / 16000, abs=0.001)
    assert (result.container, result.codec, result.sample_rate, result.channels) == (
        "s16le",
        "pcm_s16le",
        16000,
        1,
    )
    assert result.mime_type == "application/octet-stream"


def test_raw_pcm_rate_and_channels_are_honoured(tmp_path: Path) -> None:
    src = AUDIO / "goforward.raw"
    as_8k = normalize_audio(src, tmp_path / "a.wav", raw_pcm=True, raw_sample_rate=8000)
    assert as_8k.sample_rate == 8000
    assert as_8k.duration == pytest.approx(89160 / 2 / 8000, abs=0.001)
    as_stereo = normalize_audio(src, tmp_path / "b.wav", raw_pcm=True, raw_channels=2)
    assert as_stereo.channels == 2
    assert as_stereo.duration == pytest.approx(89160 / 4 / 16000, abs=0.001)


def test_headerless_pcm_without_raw_flag_is_not_audio(tmp_path: Path) -> None:
    # FFmpeg's own probe calls goforward.raw an image2 stream; sniffing refuses to guess.
    with pytest.raises(MediaError) as caught:
        normalize_audio(AUDIO / "goforward.raw", tmp_path / "out.wav")
    assert caught.value.reason == "not_audio"


@pytest.mark.parametrize(("rate", "channels"), [(4000, 1), (200_000, 1), (16000, 0)])
def test_raw_pcm_parameters_out_of_range_are_refused(
    tmp_path: Path, rate: int, channels: int
) -> None:
    with pytest.raises(ValueError):
        normalize_audio(
            AUDIO / "goforward.raw",
            tmp_path / "out.wav",
            raw_pcm=True,
            raw_sample_rate=rate,
            raw_channels=channels,
        )


# --- video ------------------------------------------------------------------------------------


def test_audio_track_of_a_video_is_normalized(tmp_path: Path) -> None:
    dst = tmp_path / "out.wav"
    result = normalize_audio(MEDIA / "moviepy__fire2.mp4", dst)
    assert (result.mime_type, result.codec) == ("video/mp4", "aac")
    assert 2.0 < result.duration < 2.5  # the video runs 2.38 s; its AAC track a bit less
    assert read_wav(dst)[2:4] == (TARGET_SAMPLE_RATE, 1)


def test_live_photo_movie_with_pcm_audio_is_normalized(tmp_path: Path) -> None:
    result = normalize_audio(MEDIA / "lychee__train.mov", tmp_path / "out.wav")
    assert (result.mime_type, result.codec) == ("video/quicktime", "pcm_s16le")
    assert result.duration == pytest.approx(1.23, abs=0.05)


def test_video_without_audio_is_no_audio(tmp_path: Path) -> None:
    with pytest.raises(MediaError) as caught:
        normalize_audio(MEDIA / "file-type__fixture.mov", tmp_path / "out.wav")
    assert caught.value.reason == "no_audio"


@pytest.mark.parametrize(
    "name", ["lychee__mongolia", "moviepy__result.webm", "file-type__fixture-json.webp"]
)
def test_image_empty_file_and_text_are_not_audio(name: str, tmp_path: Path) -> None:
    with pytest.raises(MediaError) as caught:
        normalize_audio(MEDIA / name, tmp_path / "out.wav")
    assert caught.value.reason == "not_audio"


# --- content over names, atomic output --------------------------------------------------------


def test_extension_is_ignored(tmp_path: Path) -> None:
    disguised = tmp_path / "voice.mp3"
    disguised.write_bytes((AUDIO / "LDC93S1.flac").read_bytes())
    result = normalize_audio(disguised, tmp_path / "out.wav")
    assert (result.mime_type, result.container) == ("audio/flac", "flac")


def test_failure_keeps_an_existing_destination(tmp_path: Path) -> None:
    dst = tmp_path / "out.wav"
    dst.write_bytes(b"previous result")
    with pytest.raises(MediaError):
        normalize_audio(AUDIO / "header_only_null.wav", dst)
    assert dst.read_bytes() == b"previous result"
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]


def test_destination_is_replaced_on_success(tmp_path: Path) -> None:
    dst = tmp_path / "nested" / "out.wav"
    dst.parent.mkdir()
    dst.write_bytes(b"stale")
    normalize_audio(AUDIO / "cards_005.wav", dst)
    assert read_wav(dst)[0] == "wav"


def test_writing_over_the_source_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "clip.wav"
    src.write_bytes((AUDIO / "jfk.wav").read_bytes())
    before = sha256(src)
    with pytest.raises(ValueError):
        normalize_audio(src, tmp_path / "." / "clip.wav")
    assert sha256(src) == before


def test_missing_source_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        normalize_audio(tmp_path / "absent.wav", tmp_path / "out.wav")


# --- damaged streams --------------------------------------------------------------------------


def test_truncated_recording_keeps_the_decoded_part(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = (AUDIO / "jfk.m4a").read_bytes()
    src = tmp_path / "cut.m4a"
    src.write_bytes(data[: len(data) // 2])  # moov is at the front: the samples end early
    with caplog.at_level(logging.WARNING, logger="conveyor.audio.normalize"):
        result = normalize_audio(src, tmp_path / "out.wav")
    assert 3.0 < result.duration < 8.0
    assert "keeping the decoded part" in caplog.text
    assert result.damaged is not None and "decoding stopped after" in result.damaged


def test_an_undamaged_recording_says_nothing_of_damage(tmp_path: Path) -> None:
    assert normalize_audio(AUDIO / "jfk.m4a", tmp_path / "out.wav").damaged is None


def test_truncated_flac_keeps_the_decoded_part(tmp_path: Path) -> None:
    data = (AUDIO / "LDC93S1.flac").read_bytes()
    src = tmp_path / "cut.flac"
    src.write_bytes(data[: len(data) // 2])
    result = normalize_audio(src, tmp_path / "out.wav")
    assert 0.5 < result.duration < 2.925


def test_wav_with_garbage_after_the_header_is_not_decodable_as_nothing(tmp_path: Path) -> None:
    src = tmp_path / "headless.wav"
    src.write_bytes((AUDIO / "corrupt_bad_header.wav").read_bytes()[:12] + b"\xff" * 200)
    with pytest.raises(MediaError) as caught:
        normalize_audio(src, tmp_path / "out.wav")
    assert caught.value.reason == "undecodable"


# --- generated files --------------------------------------------------------------------------


def test_ten_minute_recording_normalizes_with_correct_duration_and_level(tmp_path: Path) -> None:
    src = write_tone(tmp_path / "long.flac", "flac", "flac", seconds=600.0, rate=22050)
    dst = tmp_path / "out.wav"

    result = normalize_audio(src, dst)

    assert result.duration == pytest.approx(600.0, abs=0.05)
    # A sine of amplitude 0.5 has RMS 0.5/√2: -9.03 dBFS; its peak is -6.02 dBFS.
    assert result.rms_dbfs == pytest.approx(-9.03, abs=0.05)
    assert result.peak_dbfs == pytest.approx(-6.02, abs=0.05)
    assert dst.stat().st_size == 44 + round(result.duration * TARGET_SAMPLE_RATE) * 2


def test_opus_stereo_48k_is_resampled(tmp_path: Path) -> None:
    src = write_tone(
        tmp_path / "note.ogg", "ogg", "libopus", seconds=30.0, rate=48000, layout="stereo"
    )
    result = normalize_audio(src, tmp_path / "out.wav")
    assert (result.codec, result.sample_rate, result.channels) == ("opus", 48000, 2)
    assert result.duration == pytest.approx(30.0, abs=0.05)


def test_quiet_tone_below_minus_60_dbfs_counts_as_silent(tmp_path: Path) -> None:
    src = write_tone(
        tmp_path / "hum.wav", "wav", "pcm_s16le", seconds=2.0, rate=16000, amplitude=0.0005
    )  # -69 dBFS RMS
    result = normalize_audio(src, tmp_path / "out.wav")
    assert result.silent
    assert -75.0 < result.rms_dbfs < -60.0


@pytest.mark.parametrize(
    ("fmt", "codec", "rate", "mime", "tolerance"),
    [
        ("webm", "libopus", 48000, "video/webm", 0.05),
        ("amr", "libopencore_amrnb", 8000, "audio/amr", 0.05),
        # Bare ADTS has no edit list, so the encoder's 1024 priming samples (64 ms at 16 kHz)
        # decode as audio.
        ("adts", "aac", 16000, "audio/aac", 0.1),
        ("mp3", "libmp3lame", 44100, "audio/mpeg", 0.05),
        ("ipod", "aac", 44100, "audio/mp4", 0.05),
        ("caf", "pcm_s16le", 16000, "audio/x-caf", 0.05),
        ("aiff", "pcm_s16be", 22050, "audio/aiff", 0.05),
    ],
)
def test_other_voice_note_formats_normalize(
    tmp_path: Path, fmt: str, codec: str, rate: int, mime: str, tolerance: float
) -> None:
    src = write_tone(tmp_path / "note", fmt, codec, seconds=3.0, rate=rate)
    result = normalize_audio(src, tmp_path / "out.wav")
    assert result.mime_type == mime
    assert result.duration == pytest.approx(3.0, abs=tolerance)


def test_sample_rate_at_the_bounds_is_accepted(tmp_path: Path) -> None:
    src = write_tone(tmp_path / "hi.wav", "wav", "pcm_s16le", seconds=1.0, rate=192000)
    assert normalize_audio(src, tmp_path / "out.wav").duration == pytest.approx(1.0, abs=0.01)


def test_mp3_whose_rate_changes_part_way_is_normalized_whole(tmp_path: Path) -> None:
    # Two encodes concatenated (as some recorders and joiners write them): the decoder's frames
    # change rate part-way, so the resampling graph is rebuilt; nothing is lost.
    first = write_tone(tmp_path / "a.mp3", "mp3", "libmp3lame", seconds=2.0, rate=44100)
    bare = {"id3v2_version": "0", "write_xing": "0"}  # no tag or header frame in the middle
    second = write_tone(
        tmp_path / "b.mp3",
        "mp3",
        "libmp3lame",
        seconds=3.0,
        rate=22050,
        layout="stereo",
        options=bare,
    )
    joined = tmp_path / "joined.mp3"
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    with av.open(str(joined)) as container:
        rates = {frame.sample_rate for frame in container.decode(audio=0)}
    assert rates == {44100, 22050}  # the file really changes part-way

    result = normalize_audio(joined, tmp_path / "out.wav")

    # Each part carries its encoder's priming and padding (up to ~0.1 s at these rates).
    assert result.duration == pytest.approx(5.0, abs=0.2)
    assert result.peak_dbfs == pytest.approx(-6.02, abs=0.5)
