"""Subtitles people can read: the SRT and WebVTT downloads parsed back and held to the usual
rules for reading on screen (at most two lines of about 42 characters, at most 7 s a cue, a new
cue after each sentence and pause, never shown before its words are said); and the times of the
words a proofread leaves unchanged are kept."""

from __future__ import annotations

import re
from typing import Any

import pytest

from conveyor.api.text_formats import LINE_LENGTH, MAX_CUE, srt, vtt
from conveyor.audio.texts import kept_words

SAID = (
    "And so my fellow Americans, ask not what your country can do for you. Ask what you can "
    "do for your country. We choose to go to the Moon in this decade and do the other things, "
    "not because they are easy, but because they are hard, because that goal will serve to "
    "organize and measure the best of our energies and skills."
)


def timed(text: str, start: float, *, pause_after: int | None = None) -> list[dict[str, Any]]:
    """Words of ``text`` said one after another (0.3 s each, 0.05 s apart; a 0.9 s pause after
    word ``pause_after``)."""
    words, at = [], start
    for index, word in enumerate(text.split()):
        words.append({"start": round(at, 3), "end": round(at + 0.3, 3), "text": word})
        at += 0.35 + (0.9 if index == pause_after else 0.0)
    return words


def transcript() -> list[dict[str, Any]]:
    first = timed(SAID, 0.32, pause_after=4)
    second = timed("Yes, I heard every word of it.", 30.0)
    return [
        {"start": first[0]["start"], "end": first[-1]["end"], "text": SAID, "words": first},
        {
            "start": 30.0,
            "end": second[-1]["end"],
            "text": "Yes, I heard every word of it.",
            "words": second,
            "channel": "2",
        },
        # An older transcript's segment: no words; they are spread over its time.
        {"start": 40.0, "end": 52.0, "text": "A segment without word times " * 4, "words": []},
    ]


def seconds(stamp: str) -> float:
    hours, minutes, rest = stamp.replace(",", ".").split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(rest)


def parse(document: str, *, webvtt: bool) -> list[tuple[float, float, list[str]]]:
    """(start, end, lines) of each cue; the numbering (SRT) and header (WebVTT) checked."""
    blocks = document.strip().split("\n\n")
    if webvtt:
        assert blocks[0] == "WEBVTT"
        blocks = blocks[1:]
    cues = []
    for number, block in enumerate(blocks, 1):
        lines = block.split("\n")
        if not webvtt:
            assert lines[0] == str(number)
            lines = lines[1:]
        sep = r"\." if webvtt else ","
        found = re.fullmatch(
            rf"(\d\d:\d\d:\d\d{sep}\d\d\d) --> (\d\d:\d\d:\d\d{sep}\d\d\d)", lines[0]
        )
        assert found, lines[0]
        cues.append((seconds(found[1]), seconds(found[2]), lines[1:]))
    return cues


@pytest.mark.parametrize("webvtt", [False, True])
def test_cues_follow_the_rules_for_reading_on_screen(webvtt: bool) -> None:
    segments = transcript()
    cues = parse((vtt if webvtt else srt)(segments), webvtt=webvtt)
    words = [(w["start"], w["end"], w["text"]) for s in segments[:2] for w in s["words"]]
    shown: list[str] = []
    for start, end, lines in cues:
        assert 1 <= len(lines) <= 2, lines
        assert all(len(line) <= LINE_LENGTH for line in lines), lines
        assert end - start <= MAX_CUE + 1e-6, (start, end, lines)
        assert end > start
        text = " ".join(lines)
        if text.startswith("[2] "):
            text = text[4:]
        said = text.split()
        # A sentence ends a cue: no cue goes on after a full stop.
        assert not any(w.endswith((".", "?", "!")) for w in said[:-1]), said
        first = next((w for w in words if w[2] == said[0] and abs(w[0] - start) < 1e-3), None)
        if start < 40.0:
            # Shown when its first word is said, never before; gone once its last is said.
            assert first is not None, (start, said)
        shown += said
    # Every word is shown once, in order.
    expected = [w[2] for w in words] + ("A segment without word times " * 4).split()
    assert shown == expected
    # The pause of 0.9 s does not end a cue; the sentence ends and the segment boundary do.
    starts = [c[0] for c in cues]
    assert 30.0 in starts and 40.0 in starts
    ask = next(w for w in words if w[2] == "Ask")
    assert ask[0] in starts


def test_the_channel_of_a_segment_heard_apart_leads_its_cue() -> None:
    cues = parse(srt(transcript()), webvtt=False)
    (labelled,) = [c for c in cues if c[0] == 30.0]
    assert labelled[2][0].startswith("[2] Yes,")


def test_a_proofread_keeps_the_times_of_the_words_it_leaves_unchanged() -> None:
    words = timed("And so my fellow Americans, ask not", 0.3)
    fixed = kept_words(words, "And so, my fellow Americans: ask NOT now")
    assert [w["text"] for w in fixed] == [
        "And", "so,", "my", "fellow", "Americans:", "ask", "NOT", "now",
    ]  # fmt: skip
    kept = {w["text"]: w["start"] for w in fixed if w["start"] is not None}
    assert kept == {"And": 0.3, "my": 1.0, "fellow": 1.35, "ask": 2.05}
    assert all(w["end"] is None for w in fixed if w["start"] is None)
    assert kept_words([], "anything") == []
