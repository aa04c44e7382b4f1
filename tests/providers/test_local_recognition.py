"""The local provider on the real corpus: real faster-whisper, real processes, no mocks.

Every speech clip faster-whisper can decode is recognised once (module fixture, two recognizer
processes of one thread each) and scored against the MANIFEST's faster-whisper baseline.
``stereo_two_speakers.wav`` is left out: the MANIFEST gives it no FW WER (its downmix mixes two
utterances), so there is no baseline to hold it to.
"""

from __future__ import annotations

import re
import tempfile
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import jiwer
import pytest

from conveyor.config import TranscriptionSettings
from conveyor.providers import LocalWhisperProvider, PollResult, RecognitionRequest, Transcript
from tests.support.needs import AUDIO_CORPUS, need_corpus

AUDIO = need_corpus(AUDIO_CORPUS, module=True)
# Shared by the provider test modules and kept between runs: assembled once, then reused through
# the verification marker.
MODEL_CACHE = Path(tempfile.gettempdir()) / "conveyor-test-models"

JFK = (
    "And so my fellow Americans, ask not what your country can do for you, "
    "ask what you can do for your country."
)
LDC = "she had your dark suit in greasy wash water all year"
# file -> (reference transcript, faster-whisper WER baseline from the MANIFEST)
SPEECH = {
    "jfk.wav": (JFK, 0.0),
    "jfk.mp3": (JFK, 0.0),
    "jfk.m4a": (JFK, 0.0),
    "goforward.raw": ("go forward ten meters", 0.25),
    "sense_and_sensibility_0880.wav": ("he was not an ill disposed young man", 0.0),
    "cards_005.wav": ("eight of spades four of clubs seven of hearts", 0.444),
    "LDC93S1.opus": (LDC, 0.273),
    "LDC93S1_vorbis_8k.ogg": (LDC, 0.364),
    "LDC93S1.flac": (LDC, 0.364),
    "LDC93S1_8k_mono.wav": (LDC, 0.364),
    "LDC93S1_44k_stereo.wav": (LDC, 0.364),
    "ru_deepspeech.wav": ("бедняга ребят на его месте должен был быть я", 0.111),
    "ru_neural_networks.wav": ("нейронные сети это хорошо", 0.25),
}
RUSSIAN = ("ru_deepspeech.wav", "ru_neural_networks.wav")
NO_SPEECH = ("silence_1s.wav", "noise_no_speech_10s.wav")
WER_MARGIN = 0.1
TIMEOUT = 600.0


def words(text: str) -> str:
    """Lowercase and drop punctuation, as the MANIFEST's WER does."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate after :func:`words`; an empty hypothesis scores 1.0."""
    hyp = words(hypothesis)
    return 1.0 if not hyp else float(jiwer.wer(words(reference), hyp))


def operation_id(clip: str, language: str | None) -> str:
    return f"{clip.replace('.', '_')}-{language or 'auto'}"


def raw_to_wav(raw: Path, wav_path: Path) -> Path:
    """Wrap headerless s16le PCM (16 kHz mono assumed, as the MANIFEST says) in a WAV header."""
    with wave.open(str(wav_path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(raw.read_bytes())
    return wav_path


def wait_all(provider: LocalWhisperProvider, ids: list[str]) -> dict[str, PollResult]:
    pending, done = set(ids), {}
    deadline = time.monotonic() + TIMEOUT
    while pending and time.monotonic() < deadline:
        for op in sorted(pending):
            result = provider.poll(op)
            if result.state != "running":
                done[op] = result
                pending.discard(op)
        time.sleep(0.2)
    assert not pending, f"still running after {TIMEOUT}s: {sorted(pending)}"
    return done


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Transcript]]:
    """Every clip recognised once: ``operation_id(clip, language) -> Transcript``."""
    tmp = tmp_path_factory.mktemp("recognition")
    provider = LocalWhisperProvider(
        TranscriptionSettings(processes=2, threads=1, idle_exit=10),
        tmp / "work",
        model_cache_dir=MODEL_CACHE,
    )
    jobs: list[tuple[str, Path, str | None]] = [(clip, AUDIO / clip, None) for clip in SPEECH]
    jobs += [(clip, AUDIO / clip, "ru") for clip in RUSSIAN]
    jobs += [(clip, AUDIO / clip, None) for clip in NO_SPEECH]
    ids = []
    for clip, path, language in jobs:
        if clip == "goforward.raw":
            path = raw_to_wav(path, tmp / "goforward.wav")
        op = operation_id(clip, language)
        provider.submit(path, operation_id=op, request=RecognitionRequest(language=language))
        ids.append(op)
    results = wait_all(provider, ids)
    failed = {op: r.error for op, r in results.items() if r.state != "done"}
    assert not failed
    yield {op: provider.parse(r.raw or b"") for op, r in results.items()}


@pytest.mark.parametrize("clip", sorted(SPEECH))
def test_speech_clip_within_baseline_wer(clip: str, transcripts: dict[str, Transcript]) -> None:
    reference, baseline = SPEECH[clip]
    transcript = transcripts[operation_id(clip, None)]
    assert not transcript.no_speech
    assert transcript.segments
    assert transcript.text
    score = wer(reference, transcript.text)
    assert score <= baseline + WER_MARGIN, f"{clip}: WER {score:.3f} on {transcript.text!r}"


def test_jfk_wav_exact_reference_words(transcripts: dict[str, Transcript]) -> None:
    transcript = transcripts[operation_id("jfk.wav", None)]
    assert words(transcript.text) == words(JFK)
    assert transcript.language == "en"
    # The speech itself: "And" begins at 0.3 s; "country." ends at 10.35 s (the crowd's noise
    # after it, to the clip's end at 11 s, is not speech).
    assert transcript.segments[0].start == pytest.approx(0.3, abs=0.25)
    assert transcript.segments[-1].end == pytest.approx(10.35, abs=0.25)


@pytest.mark.parametrize("language", [None, "ru"])
@pytest.mark.parametrize("clip", RUSSIAN)
def test_russian_comes_back_in_cyrillic(
    clip: str, language: str | None, transcripts: dict[str, Transcript]
) -> None:
    transcript = transcripts[operation_id(clip, language)]
    assert transcript.language == "ru"
    assert re.search(r"[а-яё]", transcript.text, re.IGNORECASE)
    assert not re.search(r"[a-z]", transcript.text, re.IGNORECASE)
    reference, baseline = SPEECH[clip]
    assert wer(reference, transcript.text) <= baseline + WER_MARGIN


@pytest.mark.parametrize("clip", NO_SPEECH)
def test_no_speech_gives_empty_transcript(clip: str, transcripts: dict[str, Transcript]) -> None:
    transcript = transcripts[operation_id(clip, None)]
    assert transcript == Transcript(text="", segments=(), language=None, no_speech=True)
