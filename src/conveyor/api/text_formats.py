"""A transcript as SubRip (SRT) or WebVTT subtitles people can read.

The usual rules for reading on screen (as broadcasters' subtitle guidelines set them): a cue
holds at most :data:`MAX_LINES` lines of about :data:`LINE_LENGTH` characters and lasts at most
:data:`MAX_CUE` seconds; a new cue begins after a sentence ends, after a pause, and with each
segment (a segment never spans a pause of more than about a second). A cue appears when its
first word is said, never before, and stays until its last word is said (at least
:data:`MIN_CUE` seconds when the next cue leaves room).

Word times come from the transcript's words; a segment without them (an older transcript, a
word a proofread changed) has its words spread over its time in proportion to their length.
A segment heard on a channel of its own has its label in front: ``[1] ...``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LINE_LENGTH", "MAX_CUE", "MAX_LINES", "MIN_CUE", "Cue", "cues", "srt", "vtt"]

LINE_LENGTH = 42  # characters
MAX_LINES = 2
MAX_CUE = 7.0  # seconds
MIN_CUE = 1.0  # seconds, when the next cue leaves room
_PAUSE = 1.0  # seconds between words that end a cue
_SENTENCE_ENDS = (".", "!", "?", "…", "。", "！", "？")


@dataclass(frozen=True)
class Cue:
    """One subtitle: shown from ``start`` to ``end`` (seconds), ``lines`` of text."""

    start: float
    end: float
    lines: tuple[str, ...]


def _timed_words(segment: dict[str, Any]) -> list[tuple[float, float, str]]:
    """The segment's words as (start, end, text): its own times when every word has them,
    else spread over the segment by length."""
    words = segment.get("words") or []
    if words and all(w.get("start") is not None and w.get("end") is not None for w in words):
        return [(float(w["start"]), float(w["end"]), str(w["text"])) for w in words]
    texts = str(segment["text"]).split()
    start, end = float(segment["start"]), float(segment["end"])
    total = sum(len(t) + 1 for t in texts) or 1
    spread: list[tuple[float, float, str]] = []
    at = start
    for text in texts:
        length = (end - start) * (len(text) + 1) / total
        spread.append((at, at + length, text))
        at += length
    return spread


def _wrap(words: Sequence[str], width: int = LINE_LENGTH) -> list[str]:
    """Words in lines of at most ``width`` characters (a longer word has a line of its own)."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _balanced(words: Sequence[str]) -> list[str]:
    """Two lines of about equal length when the words need two (easier to read than a full
    first line and a short second)."""
    lines = _wrap(words)
    if len(lines) != 2:
        return lines
    best = lines
    for cut in range(1, len(words)):
        first, second = " ".join(words[:cut]), " ".join(words[cut:])
        fits = len(first) <= LINE_LENGTH and len(second) <= LINE_LENGTH
        if fits and abs(len(first) - len(second)) < abs(len(best[0]) - len(best[1])):
            best = [first, second]
    return best


def _segment_cues(segment: dict[str, Any]) -> list[Cue]:
    """One segment's cues, before their display times are settled."""
    label = f"[{segment['channel']}]" if segment.get("channel") else None
    groups: list[list[tuple[float, float, str]]] = []
    for word in _timed_words(segment):
        group = groups[-1] if groups else None
        if group is not None:
            texts = ([label] if label else []) + [w[2] for w in group] + [word[2]]
            if not (
                len(_wrap(texts)) > MAX_LINES
                or word[1] - group[0][0] > MAX_CUE
                or word[0] - group[-1][1] > _PAUSE
                or group[-1][2].endswith(_SENTENCE_ENDS)
            ):
                group.append(word)
                continue
        groups.append([word])
    return [
        Cue(
            group[0][0],
            group[-1][1],
            tuple(_balanced(([label] if label else []) + [w[2] for w in group])),
        )
        for group in groups
    ]


def cues(segments: Sequence[dict[str, Any]]) -> list[Cue]:
    """The transcript's segments (``start``, ``end``, ``text``, optional ``words`` and
    ``channel``) as cues in order of time; see the module docstring for the rules."""
    made = [cue for segment in segments for cue in _segment_cues(segment)]
    made.sort(key=lambda c: c.start)
    shown: list[Cue] = []
    for index, cue in enumerate(made):
        following = made[index + 1].start if index + 1 < len(made) else None
        end = max(cue.end, cue.start + MIN_CUE)
        if following is not None and following > cue.start:
            end = max(cue.end, min(end, following))
        shown.append(Cue(cue.start, min(end, cue.start + MAX_CUE), cue.lines))
    return shown


def _stamp(seconds: float, sep: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{millis:03d}"


def srt(segments: Sequence[dict[str, Any]]) -> str:
    """SubRip cues, numbered from 1, ``HH:MM:SS,mmm`` times."""
    blocks = []
    for n, cue in enumerate(cues(segments), 1):
        start, end = _stamp(cue.start, ","), _stamp(cue.end, ",")
        blocks.append(f"{n}\n{start} --> {end}\n" + "\n".join(cue.lines) + "\n")
    return "\n".join(blocks)


def vtt(segments: Sequence[dict[str, Any]]) -> str:
    """WebVTT: the ``WEBVTT`` header, then cues with ``HH:MM:SS.mmm`` times."""
    blocks = ["WEBVTT\n"]
    for cue in cues(segments):
        start, end = _stamp(cue.start, "."), _stamp(cue.end, ".")
        # "-->" inside a cue's text would end the cue line early; WebVTT has no escape for it.
        body = "\n".join(line.replace("-->", "->") for line in cue.lines)
        blocks.append(f"{start} --> {end}\n{body}\n")
    return "\n".join(blocks)
