"""Whisper-family quality gates shared by every provider that returns Whisper's segment fields.

The local recognizer and OpenAI-compatible servers (``verbose_json``) report, per segment,
``avg_logprob``, ``compression_ratio``, ``no_speech_prob`` and ``temperature``. Whisper decodes a
segment at temperature 0 and, while it fails a gate (log-prob below -1.0, or text compressing
better than 2.4: a loop), again at each higher fallback temperature, keeping the first decode that
passes. A segment that still fails a gate failed at EVERY temperature: on noise that is random
sampled text ("A-a-a-a ... beta scuba"), on speech a loop that turns a sentence said three times
into fourteen. Such segments are never kept (openai/whisper ``transcribe.py``; faster-whisper's
defaults).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["COMPRESSION_CEILING", "LOGPROB_FLOOR", "decoded_speech", "only_filler", "only_markup"]

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
    return not (isinstance(ratio, int | float) and ratio > COMPRESSION_CEILING)


def only_filler(text: str) -> bool:
    """True when ``text`` holds nothing but filler sounds, markup and punctuation."""
    words = re.findall(r"\w+", _MARKUP.sub(" ", text))
    return all(_FILLER.fullmatch(word) for word in words)


def only_markup(text: str) -> bool:
    """True when ``text`` has no word outside markup (``[BLANK_AUDIO]``, ``(coughs)``, ``♪``)."""
    return re.search(r"\w", _MARKUP.sub(" ", text)) is None
