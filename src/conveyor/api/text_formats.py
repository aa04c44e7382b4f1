"""A transcript as plain text, JSON with segment times, SubRip (SRT) or WebVTT."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["srt", "vtt"]


def _stamp(seconds: float, sep: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{millis:03d}"


def srt(segments: Sequence[dict[str, Any]]) -> str:
    """SubRip cues, numbered from 1, ``HH:MM:SS,mmm`` times."""
    cues = []
    for n, seg in enumerate(segments, 1):
        start, end = _stamp(seg["start"], ","), _stamp(seg["end"], ",")
        cues.append(f"{n}\n{start} --> {end}\n{str(seg['text']).strip()}\n")
    return "\n".join(cues)


def vtt(segments: Sequence[dict[str, Any]]) -> str:
    """WebVTT: the ``WEBVTT`` header, then cues with ``HH:MM:SS.mmm`` times."""
    cues = ["WEBVTT\n"]
    for seg in segments:
        start, end = _stamp(seg["start"], "."), _stamp(seg["end"], ".")
        # "-->" inside a cue's text would end the cue line early; WebVTT has no escape for it.
        body = str(seg["text"]).strip().replace("-->", "->")
        cues.append(f"{start} --> {end}\n{body}\n")
    return "\n".join(cues)
