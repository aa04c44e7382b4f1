"""Where a recording changes language, heard in the recognizer process.

A recording that changes language is heard stretch by stretch. When no language is set, the
recording first takes the ordinary single Whisper call (language detected on its first 30 s),
exactly as faster-whisper is called directly. Only when that pass leaves a sign of a second
language is the recording examined further (see :func:`switch_suspected`): the stretches of
speech between pauses of 0.8 s or more are each given to Whisper's language detection, and runs
of one language are transcribed with that language (one Whisper call per run). Each detection
costs an encoder pass over a 30 s window, about half the work of recognising a short clip, so a
recording in one language pays for none of them (or one, past 30 s).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["language_runs", "switch_suspected"]

_RATE = 16_000
_PAUSE_MS = 800  # a pause this long may separate two languages
_MIN_JUDGED = _RATE // 2  # shorter stretches are too short to judge their language
_MAX_DETECTIONS = 24  # bounds the extra encoder passes of a long recording
_SURE = 0.5  # detections below this probability take their neighbours' language
_SURE_WHOLE = 0.9  # a single pass's detection below this may hide a second language
_UNSURE_LOGPROB = -0.7  # a window decoded less surely than this may be in another language
_WINDOW = 30 * _RATE  # Whisper hears 30 s at a time


def language_runs(
    model: Any,
    audio: npt.NDArray[np.float32],
    single: tuple[list[dict[str, Any]], str, float],
) -> list[tuple[int, int, str]] | None:
    """``(start, end, language)`` sample ranges covering ``audio``, one per run of a language;
    None when the single pass ``single`` (segments, language, probability) stands."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    stamps = get_speech_timestamps(
        audio, VadOptions(min_silence_duration_ms=_PAUSE_MS, speech_pad_ms=200)
    )
    stretches = [(int(s["start"]), int(s["end"])) for s in stamps]
    judged = [i for i, (a, b) in enumerate(stretches) if b - a >= _MIN_JUDGED]
    if len(stretches) < 2 or len(judged) < 2:
        return None
    if not switch_suspected(model, audio, stretches, judged, single):
        return None
    blocks = _blocks(stretches, _MAX_DETECTIONS)
    said: list[str | None] = []
    for first, last in blocks:
        a, b = stretches[first][0], stretches[last][1]
        if b - a < _MIN_JUDGED:
            said.append(None)
            continue
        code, probability, _ = model.detect_language(audio[a:b])
        said.append(code if probability >= _SURE else None)
    known = [code for code in said if code is not None]
    if len(set(known)) <= 1:
        if not known or known[0] == single[1]:
            return None  # one language after all, the one the single pass used
        return [(0, audio.size, known[0])]
    filled = _fill_unsure(said, [(stretches[f][0], stretches[last][1]) for f, last in blocks])
    runs: list[tuple[int, int, str]] = []
    for index, (first, _) in enumerate(blocks):
        if runs and runs[-1][2] == filled[index]:
            continue
        # A run starts in the middle of the pause before its first stretch.
        start = 0 if not runs else (stretches[first - 1][1] + stretches[first][0]) // 2
        if runs:
            runs[-1] = (runs[-1][0], start, runs[-1][2])
        runs.append((start, audio.size, filled[index]))
    return runs


def switch_suspected(
    model: Any,
    audio: npt.NDArray[np.float32],
    stretches: list[tuple[int, int]],
    judged: list[int],
    first: tuple[list[dict[str, Any]], str, float],
) -> bool:
    """Whether the single pass may have heard a second language as the first one.

    Whisper decodes a whole 30 s window in one language: faced with a switch it either drops
    the other language's speech or makes up text in the first one. Signs, cheapest first:

    * its detection on the first 30 s was unsure (below 0.9: each language pulls its own way);
    * a stretch of speech (at least 0.5 s) that no segment of the pass covers: dropped speech;
    * a window decoded with an average log-probability below -0.7: made-up or translated text
      (Russian decoded as English came out as English at -0.96 and -1.02; English speech
      decodes at -0.2 to -0.6);
    * past 30 s (the detection saw only the start), the last stretches are detected as another
      language (one detection).

    A false sign costs detections, never the text: when they all agree with the single pass,
    it stands.
    """
    segments, language, probability = first
    if probability < _SURE_WHOLE:
        return True
    if any(float(s["avg_logprob"]) < _UNSURE_LOGPROB for s in segments):
        return True
    spans = [(float(s["start"]) * _RATE, float(s["end"]) * _RATE) for s in segments]
    for index in judged:
        a, b = stretches[index]
        if not any(start < b and end > a for start, end in spans):
            return True
    if audio.size <= _WINDOW:
        return False
    tail = judged[-1]
    a = stretches[tail][0]
    # The last stretches, up to a window's worth: enough to judge, one encoder pass.
    for index in range(tail - 1, -1, -1):
        if stretches[tail][1] - stretches[index][0] > _WINDOW:
            break
        a = stretches[index][0]
    code, sure, _ = model.detect_language(audio[a : stretches[tail][1]])
    return bool(sure >= _SURE and code != language)


def _fill_unsure(said: list[str | None], spans: list[tuple[int, int]]) -> list[str]:
    """Each unsure block takes the language of the nearest judged block (the next one on a tie)."""
    filled: list[str] = []
    for index, code in enumerate(said):
        if code is not None:
            filled.append(code)
            continue
        before = next((i for i in range(index - 1, -1, -1) if said[i] is not None), None)
        after = next((i for i in range(index + 1, len(said)) if said[i] is not None), None)
        gap_before = spans[index][0] - spans[before][1] if before is not None else None
        gap_after = spans[after][0] - spans[index][1] if after is not None else None
        if after is not None and (gap_before is None or (gap_after or 0) <= gap_before):
            filled.append(str(said[after]))
        else:
            assert before is not None
            filled.append(str(said[before]))
    return filled


def _blocks(stretches: list[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """Group consecutive stretches into at most ``most`` blocks (first, last index) of about
    equal speech length, so a long recording costs a bounded number of detections."""
    if len(stretches) <= most:
        return [(i, i) for i in range(len(stretches))]
    total = sum(b - a for a, b in stretches)
    share = total / most
    blocks: list[tuple[int, int]] = []
    first, gathered = 0, 0
    for index, (a, b) in enumerate(stretches):
        gathered += b - a
        if gathered >= share or index == len(stretches) - 1:
            blocks.append((first, index))
            first, gathered = index + 1, 0
    return blocks
