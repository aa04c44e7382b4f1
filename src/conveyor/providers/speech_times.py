"""True times for what Whisper hears after the silence is cut out (in the recognizer process).

The voice-activity filter (faster-whisper's bundled Silero VAD) finds the stretches of speech;
only they are decoded, laid end to end. Whisper's times are times in that cut audio. Mapping a
*segment's* start and end back one by one is wrong whenever a segment holds speech from both
sides of a cut: its start lands in the first stretch and its end in the last, and it spans the
whole silence between (the error equals the pause). So every *word* is mapped through the
stretch it was said in (found by the word's middle), kept inside that stretch, and segments are
rebuilt from their words and split wherever the words pause for longer than
:data:`~conveyor.providers.timing.MAX_PAUSE` or cross from one stretch to the next.

Stretches are padded by :data:`PAD_MS` on each side for decoding (Whisper needs a little
silence around speech); a word is never placed further than :data:`SLACK` outside the speech the
VAD heard, so a first word Whisper starts at the cut does not begin in the padding. Inside a
stretch, the shorter pauses the VAD hears (at least :data:`INNER_SILENCE_MS`) are kept too: a
word Whisper starts (or ends) in one starts where the speech after it begins (ends where the
speech before it ends), since Whisper's word alignment tends to stretch the first word after a
pause back to the end of the word before.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from conveyor.providers.timing import MAX_PAUSE

__all__ = [
    "INNER_SILENCE_MS",
    "PAD_MS",
    "SLACK",
    "Stretch",
    "StretchMap",
    "pause_points",
    "speech_stretches",
    "split_at_pauses",
    "unheard_runs",
]

RATE = 16_000
PAD_MS = 400  # faster-whisper's own padding: decoding context on each side of speech
MIN_SILENCE_MS = 2000  # faster-whisper's default: shorter pauses stay in the decoded audio
INNER_SILENCE_MS = 200  # pauses inside a stretch that words are moved off
SLACK = 0.1  # seconds a word may reach outside the speech the VAD heard


@dataclass(frozen=True)
class Stretch:
    """One stretch of speech, in samples of the audio it was found in.

    ``start``/``end`` bound what is decoded (padded); ``speech_start``/``speech_end`` bound
    the speech the VAD heard; ``pieces`` are the (start, end) runs of speech inside, between
    its shorter pauses.
    """

    start: int
    end: int
    speech_start: int
    speech_end: int
    pieces: tuple[tuple[int, int], ...] = ()


def speech_stretches(audio: npt.NDArray[np.float32]) -> list[Stretch]:
    """The stretches of speech in 16 kHz ``audio`` (Silero VAD as faster-whisper runs it),
    padded as faster-whisper pads them; empty when it holds no speech."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    raw = get_speech_timestamps(
        audio, VadOptions(min_silence_duration_ms=MIN_SILENCE_MS, speech_pad_ms=0)
    )
    inner = get_speech_timestamps(
        audio, VadOptions(min_silence_duration_ms=INNER_SILENCE_MS, speech_pad_ms=0)
    )
    runs = [(int(x["start"]), int(x["end"])) for x in inner]
    pad = RATE * PAD_MS // 1000
    stretches: list[Stretch] = []
    for index, found in enumerate(raw):
        a, b = int(found["start"]), int(found["end"])
        # Padding never reaches past the middle of the pause to the neighbour.
        before = int(raw[index - 1]["end"]) if index else None
        after = int(raw[index + 1]["start"]) if index + 1 < len(raw) else None
        start = max(0, a - pad) if before is None else max(a - pad, (before + a) // 2)
        end = min(audio.size, b + pad) if after is None else min(b + pad, (b + after) // 2)
        pieces = tuple((max(c, a), min(d, b)) for c, d in runs if c < b and d > a)
        stretches.append(Stretch(start, end, a, b, pieces or ((a, b),)))
    return stretches


def unheard_runs(
    pieces: list[tuple[int, int]], middles: list[float], least: int
) -> list[tuple[int, int]]:
    """The runs of consecutive ``pieces`` of speech (samples, in order) that no word was heard
    in, as ``(first, last)`` piece indices, for the runs holding at least ``least`` samples of
    speech.

    A piece is heard when the middle of a word (``middles``, seconds of the same audio) falls
    in it, or within :data:`SLACK` of it. Whisper's decoder can skip speech it believes it has
    written already (a sentence said again, where it jumps from one saying to the same words of
    the next one) and still time the segment over the speech it skipped: that speech holds no
    word's middle. A piece of a second or more always holds a word of real speech Whisper
    heard, however loose its word times.
    """
    slack = int(SLACK * RATE)
    heard = sorted(int(m * RATE) for m in middles)
    runs: list[tuple[int, int]] = []
    first: int | None = None
    amount = 0
    for index, (a, b) in enumerate(pieces):
        k = bisect.bisect_left(heard, a - slack)
        if k < len(heard) and heard[k] <= b + slack:
            if first is not None and amount >= least:
                runs.append((first, index - 1))
            first, amount = None, 0
            continue
        if first is None:
            first = index
        amount += b - a
    if first is not None and amount >= least:
        runs.append((first, len(pieces) - 1))
    return runs


def pause_points(pieces: list[tuple[int, int]], start: int, end: int) -> list[int]:
    """Where audio ``[start, end)`` holding ``pieces`` of speech (samples, in order) may be cut
    without cutting a word: its two ends and the middle of every pause between two pieces."""
    middles = [(pieces[i - 1][1] + pieces[i][0]) // 2 for i in range(1, len(pieces))]
    return [start, *[m for m in middles if start < m < end], end]


class StretchMap:
    """Maps times in the cut audio (the stretches laid end to end) back to the original.

    Args:
        stretches: the stretches decoded, in order.
        offset: seconds of the original before the audio the stretches were found in.
    """

    def __init__(self, stretches: list[Stretch], offset: float = 0.0) -> None:
        self._stretches = stretches
        self._offset = offset
        self._ends: list[int] = []  # where each stretch ends in the cut audio, samples
        laid = 0
        for stretch in stretches:
            laid += stretch.end - stretch.start
            self._ends.append(laid)

    def cut_audio(self, audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The stretches of ``audio`` laid end to end."""
        if not self._stretches:
            return audio[:0]
        return np.concatenate([audio[s.start : s.end] for s in self._stretches])

    def index(self, cut_time: float) -> int:
        """Which stretch a time in the cut audio (seconds) falls in."""
        sample = int(cut_time * RATE)
        return min(bisect.bisect_right(self._ends, sample), len(self._ends) - 1)

    def original(self, cut_time: float, index: int) -> float:
        """A time in the cut audio, as seconds of the original, inside stretch ``index``
        (within :data:`SLACK` of the speech heard there)."""
        return self._offset + self._sample(cut_time, index) / RATE

    def _sample(self, cut_time: float, index: int) -> int:
        stretch = self._stretches[index]
        laid_before = self._ends[index] - (stretch.end - stretch.start)
        sample = stretch.start + round(cut_time * RATE) - laid_before
        low = max(stretch.start, stretch.speech_start - int(SLACK * RATE))
        high = min(stretch.end, stretch.speech_end + int(SLACK * RATE))
        return min(max(sample, low), high)

    def _word(self, start_time: float, end_time: float, index: int) -> tuple[float, float]:
        """A word's (start, end) in original seconds, moved off the pauses inside its
        stretch."""
        start = self._sample(start_time, index)
        end = max(start, self._sample(end_time, index))
        slack = int(SLACK * RATE)
        pieces = self._stretches[index].pieces
        for a, b in pieces:
            if a - slack <= start < b + slack:
                break
            if start < a < end:  # begins in a pause, speech comes before its end
                start = a
                break
        for a, b in reversed(pieces):
            if a - slack < end <= b + slack:
                break
            if start < b < end:  # ends in a pause, after speech
                end = b
                break
        return self._offset + start / RATE, self._offset + end / RATE

    def words(self, words: list[Any]) -> list[dict[str, Any]]:
        """faster-whisper's words (``start``, ``end``, ``word``, ``probability`` in the cut
        audio) as dicts in original seconds, each with the index of its stretch."""
        mapped: list[dict[str, Any]] = []
        for word in words:
            index = self.index((float(word.start) + float(word.end)) / 2)
            start, end = self._word(float(word.start), float(word.end), index)
            mapped.append(
                {
                    "start": round(start, 3),
                    "end": round(end, 3),
                    "word": str(word.word),
                    "probability": round(float(word.probability), 4),
                    "stretch": index,
                }
            )
        return self._across_cuts(mapped)

    def _across_cuts(self, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Words of one segment moved to the stretch they belong to when Whisper put them on
        the wrong side of a cut: a word the neighbour after it follows in the next stretch, but
        timed past the end of its own stretch's speech, is the first word of the next stretch
        (Whisper's alignment often starts the first word after a cut early); and the other way
        round for a word timed before its stretch's speech whose neighbour before is in the
        stretch before."""
        for i, word in enumerate(words):
            k = word["stretch"]
            after = words[i + 1] if i + 1 < len(words) else None
            before = words[i - 1] if i else None
            length = word["end"] - word["start"]
            if after is not None and after["stretch"] == k + 1:
                ends = self._offset + self._stretches[k].speech_end / RATE
                if word["start"] >= ends - SLACK:
                    begins = self._offset + self._stretches[k + 1].speech_start / RATE
                    word["start"] = round(begins, 3)
                    word["end"] = round(min(begins + length, max(begins, after["start"])), 3)
                    word["stretch"] = k + 1
            elif before is not None and before["stretch"] == k - 1:
                begins = self._offset + self._stretches[k].speech_start / RATE
                if word["end"] <= begins + SLACK:
                    ends = self._offset + self._stretches[k - 1].speech_end / RATE
                    word["end"] = round(ends, 3)
                    word["start"] = round(max(ends - length, min(ends, before["end"])), 3)
                    word["stretch"] = k - 1
        return words


def split_at_pauses(segment: dict[str, Any]) -> list[dict[str, Any]]:
    """A segment with mapped ``words`` as one or more segments, split wherever the words pause
    longer than :data:`~conveyor.providers.timing.MAX_PAUSE` or cross into another stretch;
    each part's start and end are its first and last word's, its text its words'. The
    decoder's measures (``avg_logprob`` and so on) are the whole segment's, copied to each
    part."""
    words: list[dict[str, Any]] = segment.get("words") or []
    if not words:
        return [segment]
    groups: list[list[dict[str, Any]]] = [[words[0]]]
    for word in words[1:]:
        last = groups[-1][-1]
        if word["stretch"] != last["stretch"] or word["start"] - last["end"] > MAX_PAUSE:
            groups.append([word])
        else:
            groups[-1].append(word)
    parts: list[dict[str, Any]] = []
    for group in groups:
        part = dict(segment)
        part["start"] = group[0]["start"]
        part["end"] = group[-1]["end"]
        part["text"] = "".join(w["word"] for w in group)
        part["words"] = [{k: v for k, v in w.items() if k != "stretch"} for w in group]
        parts.append(part)
    return parts
