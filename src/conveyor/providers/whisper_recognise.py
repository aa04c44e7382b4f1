"""One recording recognised with a loaded faster-whisper model (in the recognizer process).

``result.json``::

    {"language": "en", "languages": ["en", "ru"], "language_probability": 0.93, "duration": 21.5,
     "segments": [{"start": 0.0, "end": 10.5, "text": " And so ...", "no_speech_prob": 0.09,
                   "avg_logprob": -0.28, "compression_ratio": 1.35, "temperature": 0.0,
                   "language": "en", "channel": null}]}

With ``"channels": true`` each channel of the input (a multi-channel WAV: one channel per
recorded channel or audio track) is recognised on its own and its segments carry its label
(``"1"``, ``"2"``, ...).

A recording that changes language is heard run by run (:mod:`conveyor.providers.language_runs`).
"""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from conveyor.providers.gates import LOGPROB_FLOOR, decoded_speech
from conveyor.providers.language_runs import language_runs

__all__ = ["recognise"]

_RATE = 16_000


def recognise(model: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Recognise ``job["input"]`` with a loaded model; see the module docstring for the result."""
    channels = _read_channels(Path(job["input"]), separate=bool(job.get("channels")))
    segments: list[dict[str, Any]] = []
    languages: list[str] = []
    probability = 0.0
    duration = 0.0
    for label, audio in channels:
        duration = max(duration, audio.size / _RATE)
        # The ordinary single pass first: what calling faster-whisper directly does.
        whole = _transcribe(model, job, audio, 0, audio.size, job["language"], label)
        passes = [whole]
        if job["language"] is None:
            runs = language_runs(model, audio, whole)
            if runs is not None:
                passes = [
                    _transcribe(model, job, audio, start, end, language, label)
                    for start, end, language in runs
                ]
        passes = [
            (_recover_loops(model, job, audio, run, label), language, probability)
            for run, language, probability in passes
        ]
        for run, language, language_probability in passes:
            if run and language not in languages:
                languages.append(language)
            probability = max(probability, language_probability)
            segments += run
    segments.sort(key=lambda s: (s["start"], s["channel"] or ""))
    return {
        "language": languages[0] if languages else job["language"],
        "languages": languages,
        "language_probability": probability,
        "duration": duration,
        "segments": segments,
    }


def _recover_loops(
    model: Any,
    job: dict[str, Any],
    audio: npt.NDArray[np.float32],
    run: list[dict[str, Any]],
    label: str | None,
) -> list[dict[str, Any]]:
    """``run`` with each looping segment decoded once more, by beam search alone.

    A window of speech said several times fails Whisper's compression check at temperature 0,
    so Whisper falls back to sampling, and a sample can loop ("ask not ..." over and over for
    the whole window): the gate drops that segment and the speech in it with it. Beam search
    without the compression fallback usually hears each saying; what it gives goes through the
    same gate, so a loop it makes too is still dropped. Costs nothing when no segment loops.
    """
    recovered: list[dict[str, Any]] = []
    for segment in run:
        if decoded_speech(segment) or float(segment["avg_logprob"]) < LOGPROB_FLOOR:
            recovered.append(segment)
            continue
        start = max(0, int(float(segment["start"]) * _RATE))
        end = min(audio.size, int(float(segment["end"]) * _RATE))
        again, _, _ = _transcribe(
            model, job, audio, start, end, segment["language"], label, beam_only=True
        )
        recovered += again
    return recovered


def _transcribe(
    model: Any,
    job: dict[str, Any],
    audio: npt.NDArray[np.float32],
    start: int,
    end: int,
    language: str | None,
    label: str | None,
    *,
    beam_only: bool = False,
) -> tuple[list[dict[str, Any]], str, float]:
    """One Whisper call on ``audio[start:end]``: its segments (times from the start of
    ``audio``), the language it used and that language's detected probability.

    ``beam_only``: beam search at temperature 0, with no fallback on the compression check and
    no conditioning on earlier text (see :func:`_recover_loops`).
    """
    extra: dict[str, Any] = {}
    if beam_only:
        extra = {
            "temperature": 0.0,
            "compression_ratio_threshold": None,
            "condition_on_previous_text": False,
        }
    found, info = model.transcribe(
        audio[start:end],
        language=language,
        beam_size=job["beam_size"],
        # Vocabulary hints (names, terms) steer the decoder's spelling of them.
        initial_prompt=job.get("initial_prompt"),
        vad_filter=True,  # faster-whisper's bundled Silero VAD: no decoding of silence
        **extra,
    )
    offset = start / _RATE
    run = [
        {
            "start": seg.start + offset,
            "end": seg.end + offset,
            "text": seg.text,
            "no_speech_prob": seg.no_speech_prob,
            "avg_logprob": seg.avg_logprob,
            "compression_ratio": seg.compression_ratio,
            "temperature": seg.temperature,
            "language": info.language,
            "channel": label,
        }
        for seg in found  # a generator: the decoding happens here
    ]
    return run, str(info.language), float(info.language_probability)


def _read_channels(
    path: Path, *, separate: bool
) -> list[tuple[str | None, npt.NDArray[np.float32]]]:
    """The input as float32 arrays at 16 kHz: one unlabelled mix, or one per channel."""
    from faster_whisper import decode_audio

    try:
        with wave.open(str(path), "rb") as source:
            count = source.getnchannels()
            if source.getframerate() == _RATE and source.getsampwidth() == 2 and count > 1:
                pcm = np.frombuffer(source.readframes(source.getnframes()), dtype="<i2")
                frames = pcm.reshape(-1, count).astype(np.float32) / 32768.0
                if separate:
                    return [(str(i + 1), np.ascontiguousarray(frames[:, i])) for i in range(count)]
                return [(None, frames.mean(axis=1).astype(np.float32))]
    except (wave.Error, EOFError):
        pass
    return [(None, decode_audio(str(path), sampling_rate=_RATE))]
