"""One recording recognised with a loaded faster-whisper model (in the recognizer process).

``result.json``::

    {"language": "en", "languages": ["en", "ru"], "language_probability": 0.93, "duration": 21.5,
     "segments": [{"start": 0.32, "end": 10.5, "text": " And so ...", "no_speech_prob": 0.09,
                   "avg_logprob": -0.28, "compression_ratio": 1.35, "temperature": 0.0,
                   "language": "en", "channel": null,
                   "words": [{"start": 0.32, "end": 0.64, "word": " And",
                              "probability": 0.91}, ...]}]}

Times are seconds of the input, true after pauses of any length: every word is mapped through
the stretch of speech it was said in, and segments are split where their words pause (see
:mod:`conveyor.providers.speech_times`).

The input is read in windows of about :data:`WINDOW` seconds, each cut in a pause of the speech
(never in a word), so memory does not grow with the recording's length; a WAV at 16 kHz
(what normalize writes) is streamed from the file, anything else is decoded whole first.

With ``"channels": true`` each channel of the input (a multi-channel WAV: one channel per
recorded channel or audio track) is recognised on its own and its segments carry its label
(``"1"``, ``"2"``, ...); the segments of all channels are put in order of time.

A recording that changes language is heard run by run (:mod:`conveyor.providers.language_runs`).
"""

from __future__ import annotations

import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from conveyor.providers.gates import LOGPROB_FLOOR, decoded_speech
from conveyor.providers.language_runs import language_runs
from conveyor.providers.speech_times import (
    Stretch,
    StretchMap,
    pause_points,
    speech_stretches,
    split_at_pauses,
    unheard_runs,
)

__all__ = ["WINDOW", "recognise", "windows"]

_RATE = 16_000
WINDOW = 120  # seconds of audio read at once (a window holds up to 1.5 x this)
_SEAM_SILENCE_MS = 300  # the shortest pause a window may be cut in
_SKIPPED = _RATE  # a second of speech no word was heard in: speech the decoder skipped


def recognise(model: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Recognise ``job["input"]`` with a loaded model; see the module docstring for the result."""
    path = Path(job["input"])
    segments: list[dict[str, Any]] = []
    languages: list[str] = []
    probability = 0.0
    duration = 0.0
    for label, index, count in _channels(path, separate=bool(job.get("channels"))):
        for offset, audio in windows(path, index, count):
            duration = max(duration, offset + audio.size / _RATE)
            for run, language, language_probability in _window(model, job, audio, label):
                if run and language not in languages:
                    languages.append(language)
                probability = max(probability, language_probability)
                segments += [_shifted(part, offset) for s in run for part in split_at_pauses(s)]
    segments.sort(key=lambda s: (s["start"], s["channel"] or ""))
    return {
        "language": languages[0] if languages else job["language"],
        "languages": languages,
        "language_probability": probability,
        "duration": round(duration, 3),
        "segments": segments,
    }


def _window(
    model: Any, job: dict[str, Any], audio: npt.NDArray[np.float32], label: str | None
) -> list[tuple[list[dict[str, Any]], str, float]]:
    """One window's passes (segments with times from the window's start, language,
    probability): the ordinary single pass, or one pass per run of a language."""
    stretches = speech_stretches(audio)
    pieces = [piece for stretch in stretches for piece in stretch.pieces]
    # The ordinary single pass first: what calling faster-whisper directly does.
    whole = _transcribe(model, job, audio, 0, audio.size, job["language"], label)
    passes = [((0, audio.size), whole)]
    if job["language"] is None:
        runs = language_runs(model, audio, whole)
        if runs is not None:
            passes = [
                ((start, end), _transcribe(model, job, audio, start, end, language, label))
                for start, end, language in runs
            ]
    heard = [
        (
            _recover_skipped(
                model,
                job,
                audio,
                _recover_loops(model, job, audio, run, label),
                label,
                language,
                [(max(a, lo), min(b, hi)) for a, b in pieces if a < hi and b > lo],
                (lo, hi),
            ),
            language,
            probability,
        )
        for (lo, hi), (run, language, probability) in passes
    ]
    return heard + _recover_dropped(model, job, audio, heard, label, stretches)


def _recover_dropped(
    model: Any,
    job: dict[str, Any],
    audio: npt.NDArray[np.float32],
    passes: list[tuple[list[dict[str, Any]], str, float]],
    label: str | None,
    stretches: list[Stretch],
) -> list[tuple[list[dict[str, Any]], str, float]]:
    """Passes over the ``stretches`` of speech (a second or more) that no word of ``passes``
    falls in, each heard alone.

    Whisper sometimes ends a 30 s window early and never hears the speech after (a short clip
    at the end of what it was given, after a pause): the stretch is then given to it alone.
    What that gives passes the same gates as everything else. Costs nothing when every
    stretch is heard.
    """
    said = [
        (float(w["start"]) + float(w["end"])) / 2
        for run, _, _ in passes
        for segment in run
        for w in segment.get("words") or []
    ]
    language = job["language"] or (passes[0][1] if passes else None)
    again: list[tuple[list[dict[str, Any]], str, float]] = []
    for stretch in stretches:
        if stretch.speech_end - stretch.speech_start < _RATE:
            continue
        start, end = stretch.start / _RATE, stretch.end / _RATE
        if any(start <= middle <= end for middle in said):
            continue
        run, heard, probability = _transcribe(
            model, job, audio, stretch.start, stretch.end, language, label
        )
        again.append((_recover_loops(model, job, audio, run, label), heard, probability))
    return again


def _recover_skipped(
    model: Any,
    job: dict[str, Any],
    audio: npt.NDArray[np.float32],
    run: list[dict[str, Any]],
    label: str | None,
    language: str,
    pieces: list[tuple[int, int]],
    bounds: tuple[int, int],
) -> list[dict[str, Any]]:
    """``run`` (one pass over ``audio[bounds[0]:bounds[1]]``, which holds ``pieces`` of speech,
    samples) with the speech it lost heard again, by beam search alone.

    Whisper's decoder, given a sentence said again, can jump from one saying to the same words
    of the next (most often in its fallback sampling, which a window of repeated speech gets
    because it compresses like a loop) and still time the segment over the audio it jumped:
    faster-whisper then goes on after that segment's end, and the words in between are never
    heard (the third of three sayings lost its first words). The same sampling can decode a
    whole window of real speech below the log-probability floor, so the gate drops all of it,
    and close the window's last segment early, so the word at its edge is never decoded. Such
    speech holds no middle of a word the gates keep (see
    :func:`~conveyor.providers.speech_times.unheard_runs`). The segments around it are decoded
    once more, together with it (see :func:`_skipped_region`); the new decode replaces them
    only when it leaves less speech unheard (counting only segments that pass the gates), so a
    decode that hears no more costs one call and changes nothing. Costs nothing when no speech
    is lost.
    """
    lo, hi = bounds
    points = pause_points(pieces, lo, hi)
    done = lo
    while True:
        found = [
            (first, last)
            for first, last in unheard_runs(
                pieces, _middles([s for s in run if decoded_speech(s)]), _SKIPPED
            )
            if pieces[first][0] >= done
        ]
        if not found:
            return run
        first, last = found[0]
        i, j, start, end = _skipped_region(run, points, pieces[first][0], pieces[last][1])
        again, _, _ = _transcribe(model, job, audio, start, end, language, label, beam_only=True)
        around = [(a, b) for a, b in pieces if a >= start and b <= end]
        if _unheard(around, again) < _unheard(around, run[i:j]):
            run = run[:i] + again + run[j:]
        done = end


def _skipped_region(
    run: list[dict[str, Any]], points: list[int], start: int, end: int
) -> tuple[int, int, int, int]:
    """The segments ``run[i:j]`` to decode again with the skipped speech ``[start, end)``
    (samples), and the samples ``[cut_start, cut_end)`` to decode: the segments a word of which
    falls in the speech, and the one on either side of them, from the pause point
    (:func:`~conveyor.providers.speech_times.pause_points`) before them to the one after,
    taking in every further segment a word of which falls inside.

    The neighbours go too because the decoder that skipped speech often skipped a word next to
    it that the piece of speech it is in does not show: a window that ended early (Whisper
    closing its last segment before speech it never decoded) goes on at the next 30 s, and the
    word at the edge is lost with the speech before it."""

    def within(low: int, high: int) -> list[int]:
        return [
            k
            for k, segment in enumerate(run)
            if any(low < m * _RATE < high for m in _middles([segment]))
        ]

    cut_start = max(p for p in points if p <= start)
    cut_end = min(p for p in points if p >= end)
    inside = within(cut_start, cut_end)
    at = sum(1 for s in run if float(s["start"]) * _RATE < start)
    i = max(0, (inside[0] if inside else at) - 1)
    j = min(len(run), (inside[-1] + 1 if inside else at) + 1)
    while i < j:
        start = min(start, int(_edges(run[i])[0] * _RATE))
        end = max(end, int(_edges(run[j - 1])[1] * _RATE))
        cut_start = max(p for p in points if p <= start)
        cut_end = min(p for p in points if p >= end)
        inside = within(cut_start, cut_end)
        grown = min(i, inside[0]), max(j, inside[-1] + 1)
        if grown == (i, j):
            break
        i, j = grown
    return i, j, cut_start, cut_end


def _middles(segments: list[dict[str, Any]]) -> list[float]:
    """The middle of every word of ``segments`` (of a segment without words, its own)."""
    middles: list[float] = []
    for segment in segments:
        words = segment.get("words") or [segment]
        middles += [(float(w["start"]) + float(w["end"])) / 2 for w in words]
    return middles


def _edges(segment: dict[str, Any]) -> tuple[float, float]:
    """Where a segment's speech begins and ends: its first word's start, its last word's end."""
    words = segment.get("words") or [segment]
    return float(words[0]["start"]), float(words[-1]["end"])


def _unheard(pieces: list[tuple[int, int]], segments: list[dict[str, Any]]) -> int:
    """Samples of speech in ``pieces`` that no word of the kept ``segments`` was heard in."""
    kept = [s for s in segments if decoded_speech(s)]
    runs = unheard_runs(pieces, _middles(kept), 0)
    return sum(b - a for first, last in runs for a, b in pieces[first : last + 1])


def _shifted(segment: dict[str, Any], offset: float) -> dict[str, Any]:
    if not offset:
        return segment
    moved = dict(segment)
    moved["start"] = round(segment["start"] + offset, 3)
    moved["end"] = round(segment["end"] + offset, 3)
    moved["words"] = [
        {**w, "start": round(w["start"] + offset, 3), "end": round(w["end"] + offset, 3)}
        for w in segment.get("words") or []
    ]
    return moved


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
    """One Whisper call on the speech in ``audio[start:end]``: its segments with their words
    (times from the start of ``audio``, mapped through the stretches of speech), the language
    it used and that language's detected probability.

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
    part = audio[start:end]
    stretches = speech_stretches(part)
    if not stretches:
        # No speech heard: Whisper's own pass (it decodes nothing) still names a language.
        found, info = model.transcribe(
            part, language=language, beam_size=job["beam_size"], vad_filter=True
        )
        return [], str(info.language), float(info.language_probability)
    mapping = StretchMap(stretches, offset=start / _RATE)
    found, info = model.transcribe(
        mapping.cut_audio(part),
        language=language,
        beam_size=job["beam_size"],
        # Vocabulary hints (names, terms) steer the decoder's spelling of them.
        initial_prompt=job.get("initial_prompt"),
        vad_filter=False,  # the silence is cut out already, and the cut is ours to map back
        word_timestamps=True,
        **extra,
    )
    run: list[dict[str, Any]] = []
    for seg in found:  # a generator: the decoding happens here
        words = mapping.words(seg.words or [])
        if words:
            first, last = words[0]["start"], words[-1]["end"]
        else:
            index = mapping.index((seg.start + seg.end) / 2)
            first, last = mapping.original(seg.start, index), mapping.original(seg.end, index)
        run.append(
            {
                "start": first,
                "end": max(first, last),
                "text": seg.text,
                "no_speech_prob": seg.no_speech_prob,
                "avg_logprob": seg.avg_logprob,
                "compression_ratio": seg.compression_ratio,
                "temperature": seg.temperature,
                "language": info.language,
                "channel": label,
                "words": words,
            }
        )
    return run, str(info.language), float(info.language_probability)


def _channels(path: Path, *, separate: bool) -> list[tuple[str | None, int | None, int]]:
    """(label, channel index or None for the mix, channel count) for each pass over the input."""
    try:
        with wave.open(str(path), "rb") as source:
            count = source.getnchannels()
    except (wave.Error, EOFError):
        count = 1
    if separate and count > 1:
        return [(str(i + 1), i, count) for i in range(count)]
    return [(None, None, count)]


def windows(
    path: Path, channel: int | None, count: int
) -> Iterator[tuple[float, npt.NDArray[np.float32]]]:
    """The input (one channel, or the mix when ``channel`` is None) as (offset in seconds,
    16 kHz float32 samples) windows of about :data:`WINDOW` seconds, each but the last ending
    in the middle of a pause of at least 0.3 s (the longest one in its second half), so no
    word is cut in two."""
    carried: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
    offset = 0
    blocks = _blocks(path, channel, count, WINDOW * _RATE)
    block = next(blocks, None)
    while block is not None:
        audio = np.concatenate([carried, block]) if carried.size else block
        block = next(blocks, None)
        cut = audio.size if block is None else _seam(audio)
        yield offset / _RATE, audio[:cut]
        carried = audio[cut:].copy()
        offset += cut
    if carried.size:
        yield offset / _RATE, carried


def _seam(audio: npt.NDArray[np.float32]) -> int:
    """Where to end a window: the middle of the longest pause in its second half; its end when
    it holds no pause there (speech without a break of 0.3 s for minutes: very rare)."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    heard = get_speech_timestamps(
        audio, VadOptions(min_silence_duration_ms=_SEAM_SILENCE_MS, speech_pad_ms=0)
    )
    half = audio.size // 2
    edges = [0, *[x for s in heard for x in (int(s["start"]), int(s["end"]))], audio.size]
    gaps = [(edges[i + 1] - edges[i], edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
    late = [(length, a, b) for length, a, b in gaps if (a + b) // 2 > half and a > 0]
    if not late:
        return audio.size
    _, a, b = max(late)
    return (a + b) // 2


def _blocks(
    path: Path, channel: int | None, count: int, size: int
) -> Iterator[npt.NDArray[np.float32]]:
    """The input in blocks of ``size`` samples: streamed from a 16 kHz 16-bit WAV, else
    decoded whole with faster-whisper's decoder and sliced."""
    try:
        with wave.open(str(path), "rb") as probe:
            streamed = probe.getframerate() == _RATE and probe.getsampwidth() == 2
    except (wave.Error, EOFError):
        streamed = False
    if not streamed:
        from faster_whisper import decode_audio

        whole = decode_audio(str(path), sampling_rate=_RATE)
        for start in range(0, max(whole.size, 1), size):
            yield whole[start : start + size]
        return
    with wave.open(str(path), "rb") as source:
        while True:
            pcm = np.frombuffer(source.readframes(size), dtype="<i2")
            if not pcm.size:
                return
            frames = pcm.reshape(-1, count).astype(np.float32) / 32768.0
            if channel is not None:
                yield np.ascontiguousarray(frames[:, channel])
            elif count > 1:
                yield frames.mean(axis=1).astype(np.float32)
            else:
                yield frames[:, 0].copy()
