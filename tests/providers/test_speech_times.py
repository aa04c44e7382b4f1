"""True times after pauses of every length: recordings built from the corpus clips with silences
of known length at known places, recognised by the real model (the recognizer alone, in this
process) and checked against where each clip's speech really is.

Each segment starts and ends within 0.25 s of the speech it holds; no segment spans a pause of
more than a second between its words; every word has times inside its clip's speech; channels
recognised apart come back in order of time. The 10-minute silence crosses a window seam of the
streaming reader (windows of about a minute) several times, so the seams are proven too.
"""

from __future__ import annotations

import itertools
import time
import wave
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import Engine

from conveyor.audio import queries
from conveyor.audio.cards import transcript_of
from conveyor.audio.intake import accept_audio
from conveyor.config import PipelineSettings, Settings, StorageSettings, TranscriptionSettings
from conveyor.providers import whisper_recognise
from conveyor.runtime import Runtime
from tests.support.base_model import MODEL_CACHE, load_base_model
from tests.support.needs import AUDIO_CORPUS

TOLERANCE = 0.25  # seconds between a segment's edge and the speech's
# A clip, then the silence after it (seconds): 0.5 s to 10 minutes.
PLAN: list[tuple[str, float]] = [
    ("LDC93S1_8k_mono.wav", 0.5),
    ("sense_and_sensibility_0880.wav", 1.5),
    ("cards_005.wav", 12.0),
    ("LDC93S1_8k_mono.wav", 600.0),
    ("sense_and_sensibility_0880.wav", 3.0),
    ("cards_005.wav", 0.0),
]


@pytest.fixture(scope="module")
def model() -> Any:
    return load_base_model()


def clip(name: str) -> npt.NDArray[np.float32]:
    from faster_whisper import decode_audio

    audio: npt.NDArray[np.float32] = decode_audio(str(AUDIO_CORPUS / name), sampling_rate=16_000)
    return audio


def speech_extent(audio: npt.NDArray[np.float32]) -> tuple[float, float]:
    """Where a clip's speech is: the first and last 50 ms frame louder than a tenth of its
    loudest frame (RMS)."""
    frames = audio[: audio.size // 800 * 800].reshape(-1, 800)
    loudness = np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1))
    loud = np.nonzero(loudness > 0.1 * loudness.max())[0]
    return float(loud[0]) * 0.05, float(loud[-1] + 1) * 0.05


def write_wav(path: Path, channels: list[npt.NDArray[np.float32]]) -> None:
    length = max(c.size for c in channels)
    frames = np.zeros((length, len(channels)), dtype="<i2")
    for index, channel in enumerate(channels):
        frames[: channel.size, index] = (channel * 32767).astype("<i2")
    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(len(channels))
        sink.setsampwidth(2)
        sink.setframerate(16_000)
        sink.writeframes(frames.tobytes())


def build(path: Path, plan: list[tuple[str, float]]) -> list[tuple[float, float]]:
    """Write ``plan`` to a mono WAV, silences streamed (the long one is never in memory
    whole); return each clip's speech as (start, end) seconds of the recording."""
    truth: list[tuple[float, float]] = []
    at = 0.0
    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16_000)
        for name, silence in plan:
            audio = clip(name)
            start, end = speech_extent(audio)
            truth.append((at + start, at + end))
            sink.writeframes((audio * 32767).astype("<i2").tobytes())
            at += audio.size / 16_000
            for _ in range(int(silence)):
                sink.writeframes(bytes(32_000))
            sink.writeframes(bytes(2 * round((silence % 1) * 16_000)))
            at += silence
    return truth


def check_times(segments: list[dict[str, Any]], truth: list[tuple[float, float]]) -> None:
    """Every clip's speech is held by segments that start and end with it; no segment spans
    a pause of more than a second; every word is timed inside its clip."""
    for start, end in truth:
        held = [s for s in segments if start - 1 <= (s["start"] + s["end"]) / 2 <= end + 1]
        assert held, f"no segment for the speech at {start:.2f}-{end:.2f}: {segments}"
        assert abs(held[0]["start"] - start) <= TOLERANCE, (start, held)
        assert abs(held[-1]["end"] - end) <= TOLERANCE, (end, held)
        for segment in held:
            words = segment["words"]
            assert words and words[0]["start"] == segment["start"]
            assert words[-1]["end"] == segment["end"]
            for word in words:
                assert start - TOLERANCE <= word["start"] <= word["end"] <= end + TOLERANCE
    for segment in segments:
        words = segment["words"]
        pauses = [b["start"] - a["end"] for a, b in itertools.pairwise(words)]
        assert all(p <= 1.0 for p in pauses), segment


def test_segments_start_and_end_with_their_speech_after_pauses_of_every_length(
    model: Any, tmp_path: Path
) -> None:
    path = tmp_path / "pauses.wav"
    truth = build(path, PLAN)
    result = whisper_recognise.recognise(
        model, {"input": str(path), "language": "en", "beam_size": 5}
    )
    segments = result["segments"]
    check_times(segments, truth)
    # Nothing is invented in the silences, and nothing is lost at the window seam.
    assert len({round(s["start"]) for s in segments}) == len(segments)
    said = " ".join(s["text"] for s in segments).lower()
    assert said.count("spades") == 2 and said.count("young man") == 2, said
    assert abs(result["duration"] - (truth[-1][1] + 0.5)) < 1.0


def test_channels_recognised_apart_interleave_by_time(model: Any, tmp_path: Path) -> None:
    """A dialogue on two channels: the left speaks, then the right answers, then the left
    again; the segments come back in that order, each on its channel, each timed."""
    rate = 16_000
    first, answer, again = (
        clip(n) for n in ("LDC93S1_8k_mono.wav", "cards_005.wav", "sense_and_sensibility_0880.wav")
    )
    left = np.zeros(int(14 * rate), dtype=np.float32)
    right = np.zeros(int(14 * rate), dtype=np.float32)
    left[: first.size] = first
    right[4 * rate : 4 * rate + answer.size] = answer
    left[9 * rate : 9 * rate + again.size] = again
    path = tmp_path / "dialogue.wav"
    write_wav(path, [left, right])
    result = whisper_recognise.recognise(
        model, {"input": str(path), "language": "en", "beam_size": 5, "channels": True}
    )
    segments = result["segments"]
    assert [s["channel"] for s in segments] == ["1", "2", "1"], segments
    truth = [
        (s + offset, e + offset)
        for audio, offset in ((first, 0.0), (answer, 4.0), (again, 9.0))
        for s, e in [speech_extent(audio)]
    ]
    check_times(segments, truth)


def test_pipeline_keeps_true_times_and_words_on_both_databases(
    engine: Engine, tmp_path: Path
) -> None:
    """Through the whole pipeline with the local recognizer in its own process: a 12 s and a
    1.5 s pause, separate channels; the transcript's segments and words are where the speech
    is, and the two channels interleave."""
    rate = 16_000
    first, answer, again = (
        clip(n) for n in ("LDC93S1_8k_mono.wav", "cards_005.wav", "sense_and_sensibility_0880.wav")
    )
    left = np.zeros(int(26 * rate), dtype=np.float32)
    right = np.zeros(int(26 * rate), dtype=np.float32)
    left[: first.size] = first
    right[15 * rate : 15 * rate + answer.size] = answer  # 12 s after the left's speech
    at = 15 * rate + answer.size + rate + rate // 2  # 1.5 s after the answer ends
    left[at : at + again.size] = again
    path = tmp_path / "dialogue.wav"
    write_wav(path, [left, right])
    settings = Settings(
        storage=StorageSettings(root=tmp_path / "data"),
        pipeline=PipelineSettings(workers=1, poll_interval=0.1),
        transcription=TranscriptionSettings(poll_delay=0.3, model_cache=MODEL_CACHE, threads=2),
    )
    runtime = Runtime(settings, engine=engine)
    rid = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        path,
        owner="ann",
        language="en",
        channels="separate",
        keep_duplicate=True,
    )
    pool = runtime.pool()
    pool.start()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with runtime.engine.connect() as conn:
                found = queries.record_by_id(conn, rid)
            assert found is not None
            row = found
            if row["stage"] == "done" or row["halted_at"] is not None:
                break
            time.sleep(0.2)
    finally:
        pool.stop()
    assert row["stage"] == "done", dict(row)
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None
    segments = text["segments"]
    assert [s["channel"] for s in segments] == ["1", "2", "1"], segments
    truth = [
        (s + offset, e + offset)
        for audio, offset in ((first, 0.0), (answer, 15.0), (again, at / rate))
        for s, e in [speech_extent(audio)]
    ]
    check_times(segments, truth)
    assert all(
        set(w) == {"start", "end", "text", "probability"} for s in segments for w in s["words"]
    )
