"""Segments that line up with the speech, whoever recognised it.

Every provider's times land in one model: a :class:`~conveyor.providers.base.Segment` with its
:class:`~conveyor.providers.base.Word` list, seconds from the start of the recording. A segment
never spans a pause between its words longer than :data:`MAX_PAUSE` (it is split there), and
when words are known its start and end are its first word's start and last word's end.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from conveyor.providers.base import Segment, Word

__all__ = ["MAX_PAUSE", "split_at_pauses", "words_of", "words_within"]

MAX_PAUSE = 1.0  # seconds


def words_of(raw: Iterable[Any], offset: float = 0.0, scale: float = 1.0) -> tuple[Word, ...]:
    """Words from a provider's list of ``{"word" or "text", "start", "end"[, "probability"]}``,
    times scaled by ``scale`` and shifted by ``offset`` seconds; blank words are left out.

    Whisper writes each word with the space before it (``" ill"``); a piece without one
    (``"-sposed"``, which Whisper splits off at a hyphen) belongs to the word before it and is
    joined to it, so the text reads ``ill-sposed``, not ``ill -sposed``. Lists whose words carry
    no spaces at all (OpenAI's API, SpeechKit, languages written without spaces) are taken word
    for word.

    Raises:
        ValueError, KeyError, TypeError: an entry is not a word with times.
    """
    items = list(raw)
    spaced = any(str(item.get("word", item.get("text", ""))).startswith(" ") for item in items)
    words: list[Word] = []
    for item in items:
        said = str(item.get("word", item.get("text", "")))
        text = said.strip()
        if not text:
            continue
        start = offset + float(item["start"]) * scale
        end = max(start, offset + float(item["end"]) * scale)
        probability = item.get("probability")
        if spaced and words and not said[:1].isspace():
            before = words[-1]
            joined = replace(before, end=max(before.end, round(end, 3)), text=before.text + text)
            if before.probability is not None and probability is not None:
                # A word is as sure as its least sure piece.
                joined = replace(joined, probability=min(before.probability, float(probability)))
            words[-1] = joined
            continue
        words.append(
            Word(
                round(start, 3),
                round(end, 3),
                text,
                None if probability is None else round(float(probability), 4),
            )
        )
    return tuple(words)


def words_within(segment: Segment, words: Sequence[Word]) -> Segment:
    """``segment`` with the words of ``words`` whose middle lies in it (a recording-wide word
    list, as OpenAI's ``timestamp_granularities[]=word`` gives), its times taken from them."""
    inside = tuple(w for w in words if segment.start <= (w.start + w.end) / 2 <= segment.end)
    if not inside:
        return segment
    return replace(segment, start=inside[0].start, end=inside[-1].end, words=inside)


def split_at_pauses(segment: Segment) -> list[Segment]:
    """``segment`` split wherever its words pause longer than :data:`MAX_PAUSE`; each part's
    text is its words' (joined by spaces), its times its first and last word's. A segment
    without words is returned as it is."""
    if not segment.words:
        return [segment]
    groups: list[list[Word]] = [[segment.words[0]]]
    for word in segment.words[1:]:
        if word.start - groups[-1][-1].end > MAX_PAUSE:
            groups.append([word])
        else:
            groups[-1].append(word)
    if len(groups) == 1:
        return [replace(segment, start=groups[0][0].start, end=groups[0][-1].end)]
    return [
        replace(
            segment,
            start=group[0].start,
            end=group[-1].end,
            text=" ".join(w.text for w in group),
            words=tuple(group),
        )
        for group in groups
    ]
