"""Speech Conveyor used to lose, each found with a small input made here from the corpus, run
through the whole pipeline with the real local recognizer on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import time
import wave
from pathlib import Path
from typing import Any

import av
import jiwer
import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from conveyor.audio import queries
from conveyor.audio.cards import record_card, transcript_of
from conveyor.audio.intake import accept_audio
from conveyor.audio.normalize import normalize_audio
from conveyor.config import Settings
from conveyor.runtime import Runtime

RATE = 16_000


def read_clip(path: Path) -> npt.NDArray[np.float64]:
    with wave.open(str(path), "rb") as source:
        assert (source.getframerate(), source.getnchannels()) == (RATE, 1)
        return np.frombuffer(source.readframes(source.getnframes()), dtype="<i2") / 32768.0


def write_wav(path: Path, channels: list[npt.NDArray[np.float64]]) -> Path:
    length = max(c.size for c in channels)
    padded = [np.pad(c, (0, length - c.size)) for c in channels]
    frames = np.stack(padded, axis=1) if len(padded) > 1 else padded[0]
    pcm = np.clip(np.round(frames * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(len(channels))
        sink.setsampwidth(2)
        sink.setframerate(RATE)
        sink.writeframes(pcm.tobytes())
    return path


def make_runtime(engine: Engine, tmp_path: Path, **transcription: Any) -> Runtime:
    settings = Settings(
        storage={"root": tmp_path / "data"},  # type: ignore[arg-type]
        pipeline={"workers": 1, "poll_interval": 0.1, "retry_base": 0.2},  # type: ignore[arg-type]
        transcription={"poll_delay": 0.2, **transcription},  # type: ignore[arg-type]
    )
    return Runtime(settings, engine=engine)


def run_to_end(runtime: Runtime, rid: int, timeout: float = 300) -> Any:
    executor = runtime.pool({}).executor
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.run_once(runtime.audio, "audio")
        with runtime.engine.connect() as conn:
            row = queries.record_by_id(conn, rid)
        assert row is not None
        if row["stage"] == "done" or row["halted_at"] is not None:
            return row
        time.sleep(0.1)
    raise AssertionError("record did not settle")


def test_quiet_memo_is_heard_not_judged_silent(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    """41 s: quiet room, one sentence peaking at -36 dBFS, quiet room. Its mean level is below
    the silence threshold; its peak is not, and the recognizer hears it."""
    speech = read_clip(corpus / "audio" / "sense_and_sensibility_0880.wav")
    speech = speech * (10 ** (-36 / 20) / np.abs(speech).max())
    rng = np.random.default_rng(7)
    room = rng.normal(0.0, 10 ** (-75 / 20), 19 * RATE)
    memo = write_wav(tmp_path / "memo.wav", [np.concatenate([room, speech, room])])
    measured = normalize_audio(memo, tmp_path / "check.wav")
    assert measured.rms_dbfs < -60.0 < measured.peak_dbfs  # the case as reported
    runtime = make_runtime(engine, tmp_path)
    rid = accept_audio(
        runtime.engine, runtime.store, runtime.clock, memo, owner="ann", keep_duplicate=True
    )
    row = run_to_end(runtime, rid)
    assert row["stage"] == "done", dict(row)
    assert row["no_speech"] is False
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None and "young man" in text["body"].lower()


def test_language_switch_gives_each_language_and_the_card_shows_both(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    """JFK in English, then the two Russian clips, with short pauses: each part in its own
    language (not made-up English, not Russian transliteration of English)."""
    pause = np.zeros(RATE)
    audio = corpus / "audio"
    clips = [
        read_clip(audio / name)
        for name in ("jfk.wav", "ru_deepspeech.wav", "ru_neural_networks.wav")
    ]
    mixed = write_wav(
        tmp_path / "switch.wav", [np.concatenate([clips[0], pause, clips[1], pause, clips[2]])]
    )
    runtime = make_runtime(engine, tmp_path)
    rid = accept_audio(
        runtime.engine, runtime.store, runtime.clock, mixed, owner="ann", keep_duplicate=True
    )
    row = run_to_end(runtime, rid)
    assert row["stage"] == "done", dict(row)
    assert row["detected_language"] == "en,ru"
    assert record_card(row, now=0.0)["languages"] == ["en", "ru"]
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None
    english = " ".join(s["text"] for s in text["segments"] if s["language"] == "en").lower()
    russian = " ".join(s["text"] for s in text["segments"] if s["language"] == "ru").lower()
    reference = (
        "and so my fellow americans ask not what your country can do for you "
        "ask what you can do for your country"
    )
    assert jiwer.wer(reference, " ".join(re.sub(r"[^\w\s]", " ", english).split())) <= 0.1
    assert "бедняга" in russian and "сет" in russian
    assert all(s["end"] <= 11.6 for s in text["segments"] if s["language"] == "en")
    assert all(s["start"] >= 11.0 for s in text["segments"] if s["language"] == "ru")


def write_two_track_mkv(path: Path, tracks: list[npt.NDArray[np.float64]]) -> Path:
    """A Matroska file with one mono FLAC audio track per array (a meeting or screen export)."""
    with av.open(str(path), "w", format="matroska") as container:
        streams = []
        for _ in tracks:
            stream = container.add_stream("flac", rate=RATE)
            stream.layout = "mono"
            streams.append(stream)
        for stream, samples in zip(streams, tracks, strict=True):
            pcm = np.clip(np.round(samples * 32767), -32768, 32767).astype(np.int16)
            for start in range(0, pcm.size, 4096):
                frame = av.AudioFrame.from_ndarray(
                    pcm[start : start + 4096].reshape(1, -1), format="s16", layout="mono"
                )
                frame.sample_rate = RATE
                frame.pts = start
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
    return path


def test_every_audio_track_is_heard(engine: Engine, tmp_path: Path, corpus: Path) -> None:
    """One speaker per track, the second speaking after the first: both are in the transcript
    and the record's history says the tracks were mixed."""
    first = read_clip(corpus / "audio" / "jfk.wav")
    second = np.concatenate(
        [np.zeros(12 * RATE), read_clip(corpus / "audio" / "sense_and_sensibility_0880.wav")]
    )
    source = write_two_track_mkv(tmp_path / "meeting.mkv", [first, second])
    runtime = make_runtime(engine, tmp_path)
    rid = accept_audio(
        runtime.engine, runtime.store, runtime.clock, source, owner="ann", keep_duplicate=True
    )
    row = run_to_end(runtime, rid)
    assert row["stage"] == "done", dict(row)
    with runtime.engine.connect() as conn:
        body = str((transcript_of(conn, rid) or {"body": ""})["body"]).lower()
        notes = " ".join(e["outcome_text"] or "" for e in queries.events_of(conn, rid))
    assert "country" in body and "young man" in body
    assert "2 audio tracks mixed" in notes


def test_two_speakers_on_two_channels_are_recognised_apart_with_labels(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    # The installation mixes by default; this recording asks for its channels apart.
    runtime = make_runtime(engine, tmp_path, channels="mix")
    rid = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "stereo_two_speakers.wav",
        owner="ann",
        channels="separate",
        keep_duplicate=True,
    )
    row = run_to_end(runtime, rid)
    assert row["stage"] == "done", dict(row)
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None
    left = " ".join(s["text"] for s in text["segments"] if s["channel"] == "1").lower()
    right = " ".join(s["text"] for s in text["segments"] if s["channel"] == "2").lower()
    assert "wizard" in left and "curtain" in left
    assert "horizon" in right and "distant" in right
    assert "[1]" in text["body"] and "[2]" in text["body"]
    assert record_card(row, now=0.0)["channels"] == "separate"


def test_channels_in_opposite_phase_are_transcribed_not_called_silence(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    """jfk.wav left and inverted right mix to digital zero: the record used to end "digital
    silence, recognition skipped". One channel is heard alone, and the history says why."""
    speech = read_clip(corpus / "audio" / "jfk.wav")
    source = write_wav(tmp_path / "antiphase.wav", [speech, -speech])
    runtime = make_runtime(engine, tmp_path)
    rid = accept_audio(
        runtime.engine, runtime.store, runtime.clock, source, owner="ann", keep_duplicate=True
    )
    row = run_to_end(runtime, rid)
    assert row["stage"] == "done" and not row["no_speech"], dict(row)
    with runtime.engine.connect() as conn:
        body = str((transcript_of(conn, rid) or {"body": ""})["body"]).lower()
        notes = " ".join(e["outcome_text"] or "" for e in queries.events_of(conn, rid))
    assert "ask not what your country" in body
    assert "cancel each other when mixed" in notes and "digital silence" not in notes
