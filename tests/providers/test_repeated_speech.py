"""Speech said again is kept: jfk.wav said two, three and four times in a row, through the real
model, the recognizer and the provider's parse, gives the sentence as many times as it was said;
and speech across Whisper's first 30 s window is kept.

The ways it was lost are covered: Whisper's window-wide compression ratio failing for segments of
real speech (the gate now judges each segment's own text), Whisper's fallback sampling looping
over the whole window (the looping segment is decoded again by beam search alone), Whisper's
decoder jumping from one saying to the same words of the next while timing its segment over the
speech it jumped (the third of three sayings lost its first words), and the fallback sampling
decoding a window below the log-probability floor and closing it before the word at its edge
(speech no kept word was heard in is decoded again with the segments around it)."""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conveyor.config import TranscriptionSettings
from conveyor.providers import LocalWhisperProvider, whisper_recognise
from conveyor.providers.speech_times import pause_points, unheard_runs
from tests.support.base_model import MODEL_CACHE, load_base_model
from tests.support.needs import AUDIO_CORPUS

# The start and the end of the sentence: a saying cut by Whisper's 30 s window still has both.
SAYING = ("ask not what", "for your country")


@pytest.fixture(scope="module")
def model() -> Any:
    return load_base_model()


def repeated(times: int, folder: Path) -> Path:
    """jfk.wav said ``times`` times, each saying followed by a second of silence, as a WAV."""
    from faster_whisper import decode_audio

    jfk = decode_audio(str(AUDIO_CORPUS / "jfk.wav"), sampling_rate=16_000)
    pause = np.zeros(16_000, dtype=np.float32)
    audio = np.concatenate([part for _ in range(times) for part in (jfk, pause)])
    path = folder / f"jfk_{times}.wav"
    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16_000)
        sink.writeframes((audio * 32767).astype("<i2").tobytes())
    return path


def sayings(model: Any, path: Path, work: Path) -> list[int]:
    """How often the start and the end of the sentence are in the transcript of ``path``."""
    result = whisper_recognise.recognise(
        model, {"input": str(path), "language": None, "beam_size": 5}
    )
    provider = LocalWhisperProvider(TranscriptionSettings(), work, model_cache_dir=MODEL_CACHE)
    transcript = provider.parse(json.dumps(result).encode())
    said = " ".join("".join(c if c.isalnum() else " " for c in transcript.text.lower()).split())
    return [said.count(part) for part in SAYING]


@pytest.mark.parametrize("times", [2, 3, 4])
def test_a_sentence_said_again_is_kept_every_time(model: Any, tmp_path: Path, times: int) -> None:
    assert sayings(model, repeated(times, tmp_path), tmp_path / "work") == [times, times]


def test_a_recognizer_that_heard_it_before_keeps_every_saying(tmp_path: Path) -> None:
    """The same recording twice through one freshly loaded (seeded) model, as a warm recognizer
    hears recording after recording: Whisper's fallback sampling goes on from where the first
    hearing left it. On the second hearing its decoder jumped from the second saying's "ask" to
    the third saying's "what you can" and timed that segment from 12 s to 30 s, so the third
    saying lost "and so my fellow Americans ask not what your" (the speech no word was heard in
    is now decoded again, with the segment around it)."""
    model = load_base_model()
    path = repeated(3, tmp_path)
    for hearing in range(2):
        assert sayings(model, path, tmp_path / f"work{hearing}") == [3, 3], hearing


def test_speech_no_word_was_heard_in_is_found() -> None:
    """Pieces of speech (samples at 16 kHz) that no word's middle falls in, a second or more of
    them in a row; a word's middle just outside a piece still hears it."""
    second = 16_000
    pieces = [(0, second), (2 * second, 3 * second), (3 * second + 4_000, 4 * second)]
    # A word in the first piece only: the next two (1.75 s of speech) were skipped.
    assert unheard_runs(pieces, [0.5], second) == [(1, 2)]
    # One in the middle piece too: the last alone is too short to count as skipped...
    assert unheard_runs(pieces, [0.5, 2.5], second) == []
    # ...unless any length counts.
    assert unheard_runs(pieces, [0.5, 2.5], 0) == [(2, 2)]
    # A middle within 0.1 s of a piece's edge hears it.
    assert unheard_runs(pieces, [1.05, 1.95, 3.2], second) == []
    assert pause_points(pieces, 0, 5 * second) == [0, 24_000, 50_000, 5 * second]


def test_speech_across_the_first_window_edge_after_a_pause_is_kept(tmp_path: Path) -> None:
    """The corpus's short clips, 0.7 s apart (three of them said again, in turn), for 29 s, a
    pause, then jfk.wav across Whisper's first 30 s window. Whisper's fallback sampling decoded
    that window below its log-probability floor (all of it dropped by the gate: 29 s of speech)
    and closed its last segment before "ask", so faster-whisper went on at 30 s and "ask" was
    never heard either; now the window, with the segment after it, is decoded again."""
    from faster_whisper import decode_audio

    def clip(name: str) -> Any:
        return decode_audio(str(AUDIO_CORPUS / name), sampling_rate=16_000)

    fillers = [
        clip(n) for n in ("sense_and_sensibility_0880.wav", "cards_005.wav", "LDC93S1_8k_mono.wav")
    ]
    gap = np.zeros(int(16_000 * 0.7), dtype=np.float32)
    parts: list[Any] = []
    seconds = 0.0
    while seconds + fillers[len(parts) // 2 % 3].size / 16_000 + 0.7 <= 28.0:
        filler = fillers[len(parts) // 2 % 3]
        parts += [filler, gap]
        seconds += filler.size / 16_000 + 0.7
    parts += [np.zeros(int(16_000 * (29.0 - seconds)), dtype=np.float32), clip("jfk.wav")]
    parts += [np.zeros(8_000, dtype=np.float32), fillers[0]]
    audio = np.concatenate(parts)
    path = tmp_path / "edge.wav"
    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16_000)
        sink.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    result = whisper_recognise.recognise(
        load_base_model(), {"input": str(path), "language": None, "beam_size": 5}
    )
    provider = LocalWhisperProvider(
        TranscriptionSettings(), tmp_path / "work", model_cache_dir=MODEL_CACHE
    )
    text = provider.parse(json.dumps(result).encode()).text
    said = " ".join("".join(c if c.isalnum() else " " for c in text.lower()).split())
    sentence = (
        "and so my fellow americans ask not what your country can do for you "
        "ask what you can do for your country"
    )
    assert sentence in said and said.count("spades") == 2, text
