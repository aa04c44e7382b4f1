"""The OpenAI-compatible adapter over real HTTP against a loopback ``/v1/audio/transcriptions``
server built from the published API, through the audio pipeline on SQLite and PostgreSQL.

D2: the synchronous answer is stored before it is parsed; D12: a lost answer is never repeated on
its own, and chunks already recognised are never paid for again; D16: the key is stored nowhere.
"""

from __future__ import annotations

import itertools
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine

from conveyor.audio.cards import transcript_of
from conveyor.pipeline import resume
from conveyor.providers.backends.openai import OpenAISettings
from conveyor.providers.local import whisper_languages
from conveyor.providers.openai_compatible import OpenAICompatibleProvider
from conveyor.testing import FakeClock
from tests.support.loopback import KEY, Loopback, OpenAIState, openai_server
from tests.support.remote import attempts, drive, everything_stored, ingest, make_runtime


@pytest.fixture
def server() -> Iterator[Loopback]:
    loopback = openai_server()
    yield loopback
    loopback.close()


def state_of(server: Loopback) -> OpenAIState:
    state: OpenAIState = server.state
    return state


def provider_for(
    server: Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **extra: object
) -> OpenAICompatibleProvider:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    settings = OpenAISettings(base_url=server.url + "/v1", timeout=10.0, **extra)  # type: ignore[arg-type]
    return OpenAICompatibleProvider(settings, whisper_languages(), tmp_path / "openai")


def speech_with_pauses(corpus: Path, out: Path, *, copies: int, pause: float) -> list[float]:
    """``copies`` of jfk.wav with ``pause`` s of silence between; returns each pause's middle."""
    with wave.open(str(corpus / "audio" / "jfk.wav"), "rb") as source:
        speech = np.frombuffer(source.readframes(source.getnframes()), dtype="<i2")
    gap = np.zeros(int(pause * 16000), dtype="<i2")
    middles, pieces, at = [], [], 0.0
    for index in range(copies):
        pieces.append(speech)
        at += speech.size / 16000
        if index < copies - 1:
            pieces.append(gap)
            middles.append(at + pause / 2)
            at += pause
    with wave.open(str(out), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16000)
        sink.writeframes(np.concatenate(pieces).tobytes())
    return middles


def test_d2_d16_happy_path_drops_segments_flagged_by_the_response(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = provider_for(server, tmp_path, monkeypatch)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    rid = ingest(runtime, corpus / "audio" / "jfk.wav", language="en")
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert row["detected_language"] == "en"  # "english" in verbose_json
    (upload,) = state_of(server).uploads
    assert upload["model"] == "whisper-1"
    assert upload["response_format"] == "verbose_json"
    assert upload["timestamp_granularities[]"] == "segment,word"
    assert upload["language"] == "en"
    assert upload["filename"] == "audio.ogg" and upload["content_type"] == "audio/ogg"
    assert upload["bytes"] < 60_000  # Opus, not 352 kB of WAV
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    # Silence ("Thank you for watching."), a loop (compression 3.1) and [BLANK_AUDIO] are dropped.
    assert text is not None and text["body"] == "Chunk of 11.0 seconds."
    (attempt,) = attempts(runtime, rid)
    assert attempt["state"] == "done" and attempt["raw_response_file_id"] is not None
    # Marked submitted with what the answer named, as an asynchronous provider's attempt is.
    assert attempt["source_url"] == "inline" and attempt["operation_id"].startswith(f"rec{rid}-")
    assert KEY not in everything_stored(runtime)


def test_long_recording_is_split_at_silences_with_correct_offsets(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = tmp_path / "long.wav"
    pauses = speech_with_pauses(corpus, source, copies=4, pause=1.5)
    # 65,536 bytes per request at 32 kbit/s: about 14 s of audio per chunk.
    state = state_of(server)
    state.max_bytes = 65_536
    provider = provider_for(server, tmp_path, monkeypatch, max_request_bytes=65_536)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    rid = ingest(runtime, source)
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    uploads = state.uploads
    assert len(uploads) == 4
    assert all(u["bytes"] <= 65_536 for u in uploads)
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None
    starts = [s["start"] for s in text["segments"]]
    # Each chunk's segment starts where the chunk does: the cuts, which lie in the pauses.
    assert starts[0] == 0.0
    for cut, middle in zip(starts[1:], pauses, strict=True):
        assert abs(cut - middle) < 0.8, (starts, pauses)
    ends = [s["end"] for s in text["segments"]]
    assert abs(ends[-1] - float(row["duration"])) < 0.1


def test_d12_lost_answer_halts_submit_unknown_and_is_not_repeated(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = make_runtime(engine, tmp_path, provider_for(server, tmp_path, monkeypatch), clock)
    state = state_of(server)
    state.lose_next_answer = True
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid)
    assert (row["stage"], row["halt_reason"]) == ("normalized", "submit_unknown")
    assert len(state.uploads) == 1
    clock.advance(3600)
    drive(runtime, clock, rid, steps=3)
    assert len(state.uploads) == 1
    resume(runtime.engine, runtime.audio, rid, clock=runtime.clock)
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done" and len(state.uploads) == 2


def test_429_storm_waits_retry_after_and_chunks_done_are_not_paid_again(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = tmp_path / "long.wav"
    speech_with_pauses(corpus, source, copies=2, pause=1.5)
    state = state_of(server)
    provider = provider_for(server, tmp_path, monkeypatch, max_request_bytes=65_536)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    rid = ingest(runtime, source)
    executor = runtime.pool({}).executor
    assert executor.run_once(runtime.audio, "audio")  # normalize
    # The first chunk goes through, then a storm of 429s on the second.
    original = provider._transcribe
    calls = {"n": 0}

    def storm_after_first(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 2:
            state.throttle = 5
            state.retry_after = "9"
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(provider, "_transcribe", storm_after_first)
    row, pauses = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert len(state.uploads) == 2  # one per chunk: the first was not paid again
    assert sum(1 for p in pauses if p >= 9.0) >= 5


def test_server_down_is_waited_out_and_errors_on_200_halt(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = make_runtime(engine, tmp_path, provider_for(server, tmp_path, monkeypatch), clock)
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    server.down()
    row, _ = drive(runtime, clock, rid, until=clock.now() + 600)
    assert row["stage"] == "normalized" and row["halted_at"] is None
    server.up()
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done"
    # whisper.cpp reports a failure as HTTP 200 {"error": ...}: a clear halt, not a transcript.
    state_of(server).error_on_200 = True
    other = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, other)
    assert row["halt_reason"] == "provider_rejected"
    assert "failed to read audio" in row["halt_error"]


def test_wrong_key_halts_provider_auth_and_never_shows_it(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_file = tmp_path / "openai.key"
    key_file.write_text("sk-wrong-0123456789abcdef\n")
    provider = provider_for(server, tmp_path, monkeypatch, key_file=key_file)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid)
    assert row["halt_reason"] == "provider_auth"
    assert "sk-wrong-0123456789abcdef" not in everything_stored(runtime)


def test_parse_localai_nanoseconds_and_json_only_models(
    tmp_path: Path, server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    provider = provider_for(server, tmp_path, monkeypatch)
    raw = {
        "provider": "openai",
        "model": "whisper-1",
        "chunks": [
            {"start": 0.0, "end": 12.0, "response": {"text": "a", "language": "en", "segments": [
                {"start": 0, "end": 9_640_000_000, "text": " Ask not."}]}},
            {"start": 12.0, "end": 20.0, "response": {"text": " Ты где?"}},
        ],
    }  # fmt: skip
    transcript = provider.parse(json.dumps(raw).encode())
    assert [(s.start, s.end, s.text) for s in transcript.segments] == [
        (0.0, 9.64, "Ask not."),
        (12.0, 20.0, "Ты где?"),
    ]
    with pytest.raises(ValueError, match="not an OpenAI-compatible response"):
        provider.parse(b'{"text": "no chunks"}')


def test_vocabulary_hints_of_the_record_reach_the_recognizer_as_its_prompt(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = make_runtime(engine, tmp_path, provider_for(server, tmp_path, monkeypatch), clock)
    rid = ingest(runtime, corpus / "audio" / "jfk.wav", hints="  Kennedy,\n Sorensen ")
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done"
    (upload,) = state_of(server).uploads
    assert upload["prompt"] == "Kennedy, Sorensen"


def _speech_runs(audio: bytes) -> list[tuple[float, float]]:
    """Where a chunk the server received holds sound: (start, end) seconds, runs of 20 ms
    frames above the noise floor, apart when quiet for more than half a second."""
    import io

    import av

    with av.open(io.BytesIO(audio), mode="r") as container:
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate
        samples = np.concatenate(
            [f.to_ndarray().reshape(-1) for f in container.decode(stream)]
        ).astype(np.float64)
    frame = rate // 50
    loud = np.abs(samples[: samples.size // frame * frame]).reshape(-1, frame).max(axis=1)
    heard = np.nonzero(loud > 0.05 * max(float(loud.max()), 1e-9))[0]
    runs: list[tuple[float, float]] = []
    for index in heard:
        at = index / 50
        if runs and at - runs[-1][1] <= 0.5:
            runs[-1] = (runs[-1][0], at + 0.02)
        else:
            runs.append((at, at + 0.02))
    return runs


def test_word_times_map_through_chunks_and_split_segments_at_pauses(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server times words where the speech of its chunk really is and answers with one
    segment per chunk spanning the pauses (as a server without its own pause handling
    does); the adapter asks for word times, shifts them by the chunk's start, and splits
    segments at every pause: each segment starts and ends with the speech it holds."""
    source = tmp_path / "pauses.wav"
    speech_with_pauses(corpus, source, copies=3, pause=6.0)
    with wave.open(str(corpus / "audio" / "jfk.wav"), "rb") as clip:
        length = clip.getnframes() / 16000
    state = state_of(server)
    state.flagged = False

    def recognise(audio: bytes) -> list[dict[str, object]]:
        runs = _speech_runs(audio)
        words = [
            {"word": f" w{i}{half}", "start": round(a, 3), "end": round(b, 3)}
            for i, (start, end) in enumerate(runs)
            for half, (a, b) in enumerate([(start, (start + end) / 2), ((start + end) / 2, end)])
        ]
        text = "".join(str(w["word"]) for w in words)
        return [{"start": 0.0, "end": runs[-1][1], "text": text, "words": words}]

    state.recognise = recognise
    state.max_bytes = 65_536
    provider = provider_for(server, tmp_path, monkeypatch, max_request_bytes=65_536)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    rid = ingest(runtime, source)
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert len(state.uploads) > 1  # chunks, each timed from its own start
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None
    # Where the speech is: jfk.wav's own runs, at each copy's place.
    with wave.open(str(source), "rb") as whole:
        pcm = whole.readframes(whole.getnframes())
    buffer = tmp_path / "whole.wav"
    with wave.open(str(buffer), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16000)
        sink.writeframes(pcm)
    truth = _speech_runs(buffer.read_bytes())
    segments = text["segments"]
    starts, ends = [a for a, _ in truth], [b for _, b in truth]
    for segment in segments:
        # Each segment starts and ends where a run of speech does (0.25 s at most away).
        assert min(abs(segment["start"] - a) for a in starts) <= 0.25, (segment, truth)
        assert min(abs(segment["end"] - b) for b in ends) <= 0.25, (segment, truth)
        assert segment["words"] and segment["words"][0]["start"] == segment["start"]
    # Every run after a pause of clearly more than a second begins a segment.
    for (_, before), (start, _) in itertools.pairwise(truth):
        if start - before > 1.2:
            assert min(abs(s["start"] - start) for s in segments) <= 0.25, (start, segments)
    # No segment spans a pause of more than a second between its words.
    for segment in segments:
        words = segment["words"]
        assert all(b["start"] - a["end"] <= 1.0 for a, b in itertools.pairwise(words))
    assert segments[-1]["start"] > 2 * (length + 6.0)  # the third copy, after two pauses
