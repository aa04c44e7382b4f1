"""Whisper-family quality gates shared by every provider that returns Whisper's segment fields.

The local recognizer and OpenAI-compatible servers (``verbose_json``) report, per segment,
``avg_logprob``, ``compression_ratio``, ``no_speech_prob`` and ``temperature``. Whisper decodes a
segment at temperature 0 and, while it fails a gate (log-prob below -1.0, or text compressing
better than 2.4: a loop), again at each higher fallback temperature, keeping the first decode that
passes. A segment that still fails a gate failed at EVERY temperature: on noise that is random
sampled text ("A-a-a-a ... beta scuba"), on speech a loop that turns a sentence said three times
into fourteen. Such segments are never kept (openai/whisper ``transcribe.py``; faster-whisper's
defaults).

One refinement: Whisper measures the compression ratio over the whole text of its 30 s window,
and every segment of the window reports that one figure. A sentence a speaker really says twice
in one window compresses like a loop, so a window whose ratio fails is judged segment by segment:
a segment whose own text compresses better than 2.4, or repeats a run of words three times in a
row, is the loop and is dropped; a segment that is one saying of a sentence said again in the
next segment is speech, and is kept.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "COMPRESSION_CEILING",
    "LOGPROB_FLOOR",
    "compression_ratio",
    "decoded_speech",
    "only_filler",
    "only_markup",
]

LOGPROB_FLOOR = -1.0
"""Whisper's ``log_prob_threshold``."""
COMPRESSION_CEILING = 2.4
"""Whisper's ``compression_ratio_threshold``."""

# Markup Whisper emits for non-speech ("[Music]", "(coughs)", "*sigh*", "♪", "[BLANK_AUDIO]").
_MARKUP = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|[♪♫♩♬]")
# Hesitation sounds; a transcript made only of these (Whisper gave "uh"/"Oh" on pure noise) is no
# speech. Checked on whole words, so "ohm" or "umbrella" never match.
_FILLER = re.compile(
    r"u+h+|u+m+|h+m+|m+h*m*|h+u+h+|a+h+|o+h+|e+h+|e+r+m*|э+|э+м+|м+|х+м+",
    re.IGNORECASE,
)


def decoded_speech(segment: Mapping[str, Any]) -> bool:
    """False for a segment that failed Whisper's gates at every temperature. This covers
    Whisper's no-speech rule (no_speech_prob > 0.6 with avg_logprob < -1.0) too.

    A field the server does not report (whisper.cpp has no ``compression_ratio``) is not checked.
    """
    logprob = segment.get("avg_logprob")
    if isinstance(logprob, int | float) and logprob < LOGPROB_FLOOR:
        return False
    ratio = segment.get("compression_ratio")
    if not (isinstance(ratio, int | float) and ratio > COMPRESSION_CEILING):
        return True
    # The window failed; the loop is in the segments whose own text repeats itself.
    text = str(segment.get("text") or "")
    return compression_ratio(text) <= COMPRESSION_CEILING and not _thrice_in_a_row(text)


def _thrice_in_a_row(text: str) -> bool:
    """True when some run of words comes three times in a row ("the the the", "ask not ask not
    ask not"): too short to compress, yet a loop."""
    words = re.findall(r"\w+", text.lower())
    for size in range(1, len(words) // 3 + 1):
        for start in range(len(words) - 3 * size + 1):
            unit = words[start : start + size]
            if (
                unit
                == words[start + size : start + 2 * size]
                == words[start + 2 * size : start + 3 * size]
            ):
                return True
    return False


def compression_ratio(text: str) -> float:
    """UTF-8 bytes of ``text`` over its zlib-compressed bytes: Whisper's own measure (a loop
    compresses far better than speech); 0.0 for empty text."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def only_filler(text: str) -> bool:
    """True when ``text`` holds nothing but filler sounds, markup and punctuation."""
    words = re.findall(r"\w+", _MARKUP.sub(" ", text))
    return all(_FILLER.fullmatch(word) for word in words)


def only_markup(text: str) -> bool:
    """True when ``text`` has no word outside markup (``[BLANK_AUDIO]``, ``(coughs)``, ``♪``)."""
    return re.search(r"\w", _MARKUP.sub(" ", text)) is None
