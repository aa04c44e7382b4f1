"""The language-switch check costs a recording in one language nothing beyond the single pass
faster-whisper makes when called directly: no extra language detection (each is an encoder pass
over a 30 s window), while a recording that switches is still examined stretch by stretch."""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conveyor.providers import language_runs, whisper_recognise
from tests.support.base_model import load_base_model
from tests.support.needs import AUDIO_CORPUS


class CountingModel:
    """The real Whisper model, counting its language detections (faster-whisper's own included:
    ``transcribe`` without a language calls ``detect_language`` once)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.detections = 0
        original = model.detect_language

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.detections += 1
            return original(*args, **kwargs)

        model.detect_language = counting

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@pytest.fixture(scope="module")
def model() -> CountingModel:
    return CountingModel(load_base_model())


def recognise(model: CountingModel, path: Path) -> dict[str, Any]:
    model.detections = 0
    return whisper_recognise.recognise(
        model, {"input": str(path), "language": None, "beam_size": 5}
    )


@pytest.mark.parametrize("clip", ["jfk.wav", "ru_deepspeech.wav"])
def test_one_language_over_several_pauses_costs_no_extra_detection(
    model: CountingModel, clip: str
) -> None:
    """Both clips have three stretches of speech between pauses of 0.8 s or more: before, each
    stretch cost a detection of its own."""
    result = recognise(model, AUDIO_CORPUS / clip)
    assert model.detections == 1  # faster-whisper's own, as when called directly
    assert result["languages"] == [clip[:2].replace("jf", "en")]


def test_a_switch_is_still_examined_stretch_by_stretch(
    model: CountingModel, tmp_path: Path
) -> None:
    pieces = []
    for name in ("jfk.wav", "ru_deepspeech.wav", "ru_neural_networks.wav"):
        with wave.open(str(AUDIO_CORPUS / name), "rb") as source:
            pieces += [np.frombuffer(source.readframes(source.getnframes()), dtype="<i2")]
            pieces += [np.zeros(16_000, dtype="<i2")]
    mixed = tmp_path / "switch.wav"
    with wave.open(str(mixed), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16_000)
        sink.writeframes(np.concatenate(pieces[:-1]).tobytes())
    result = recognise(model, mixed)
    assert result["languages"] == ["en", "ru"]
    assert model.detections > 1


def test_a_switch_away_and_back_past_the_first_30_s_is_heard(
    model: CountingModel, tmp_path: Path
) -> None:
    """English for 32 s, Russian, English again: Whisper's detection (first 30 s) and the tail
    detection both say English; the single pass drops the Russian middle, and that uncovered
    speech is the sign that sends the recording stretch by stretch."""
    from faster_whisper import decode_audio

    def clip(name: str) -> np.ndarray[Any, np.dtype[np.float32]]:
        audio: np.ndarray[Any, np.dtype[np.float32]] = decode_audio(
            str(AUDIO_CORPUS / name), sampling_rate=16_000
        )
        return audio

    pause = np.zeros(16_000, dtype=np.float32)
    english = ["jfk.wav", "sense_and_sensibility_0880.wav", "jfk.wav", "cards_005.wav"]
    russian = ["ru_deepspeech.wav", "ru_neural_networks.wav"]
    parts = [p for name in english + russian for p in (clip(name), pause)] + [clip("jfk.wav")]
    audio = np.concatenate(parts)
    russian_from = sum(p.size for p in parts[: 2 * len(english)]) / 16_000
    russian_to = russian_from + sum(p.size for p in parts[2 * len(english) : -1]) / 16_000
    assert russian_from > 30
    mixed = tmp_path / "away_and_back.wav"
    with wave.open(str(mixed), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16_000)
        sink.writeframes((audio * 32767).astype("<i2").tobytes())
    result = recognise(model, mixed)
    assert result["languages"] == ["en", "ru"]
    middle = [s for s in result["segments"] if russian_from - 1 <= s["start"] < russian_to - 1]
    assert middle and all(s["language"] == "ru" for s in middle)
    assert any("сети" in s["text"].lower() for s in middle)
    last = result["segments"][-1]
    assert last["language"] == "en" and "country" in last["text"]


def test_a_window_decoded_unsurely_is_a_sign_of_another_language(model: CountingModel) -> None:
    """Russian decoded as English comes out as English text at an average log-probability near
    -1 (-0.96 for ru_deepspeech.wav), English speech at -0.2 to -0.6: a single pass whose
    segments all cover their speech, sure of its language, is still examined when a window was
    decoded below -0.7."""
    from faster_whisper import decode_audio

    audio = np.concatenate(
        [
            decode_audio(str(AUDIO_CORPUS / "jfk.wav"), sampling_rate=16_000),
            np.zeros(16_000, dtype=np.float32),
            decode_audio(str(AUDIO_CORPUS / "ru_deepspeech.wav"), sampling_rate=16_000),
        ]
    )
    stretches = [(0, 11 * 16_000), (12 * 16_000, audio.size)]
    judged = [0, 1]

    def single_pass(logprob: float) -> tuple[list[dict[str, Any]], str, float]:
        segments = [
            {"start": a / 16_000, "end": b / 16_000, "avg_logprob": logprob} for a, b in stretches
        ]
        return segments, "en", 0.97

    suspected = language_runs.switch_suspected
    assert suspected(model, audio, stretches, judged, single_pass(-0.96))
    assert not suspected(model, audio, stretches, judged, single_pass(-0.3))
