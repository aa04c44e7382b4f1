"""Make a normalized recording (16 kHz mono s16 WAV) small enough for a remote provider.

* :func:`encode_opus` writes a stretch of it as Ogg Opus (speech at 32 kbit/s is about 14 MB an
  hour, against 115 MB of WAV), a format SpeechKit and OpenAI-compatible servers accept;
* :func:`plan_chunks` cuts a recording longer than a request may carry at its quietest moments,
  so that no word is cut in two; each chunk's start is the offset its segment times are shifted by.

Both stream the WAV a window at a time: memory does not grow with the recording's length.
"""

from __future__ import annotations

import wave
from pathlib import Path

import av
import numpy as np

__all__ = ["WINDOW", "encode_opus", "plan_chunks"]

WINDOW = 0.1
"""Seconds per loudness window when looking for a quiet place to cut."""
_RATE = 16_000
_FRAME = 960  # 60 ms at 16 kHz: one Opus frame


def encode_opus(
    wav: Path, out: Path, *, start: float = 0.0, end: float | None = None, bitrate: int = 32_000
) -> int:
    """Encode ``wav[start:end]`` (seconds) as mono Ogg Opus at ``bitrate`` bit/s into ``out``.

    Returns:
        The size of ``out`` in bytes.

    Raises:
        ValueError: ``wav`` is not 16 kHz mono 16-bit.
    """
    with wave.open(str(wav), "rb") as source:
        if (source.getframerate(), source.getnchannels(), source.getsampwidth()) != (_RATE, 1, 2):
            raise ValueError(f"{wav.name} is not 16 kHz mono 16-bit WAV")
        total = source.getnframes()
        first = min(total, round(start * _RATE))
        last = total if end is None else min(total, round(end * _RATE))
        source.setpos(first)
        with av.open(str(out), "w", format="ogg") as container:
            stream = container.add_stream("libopus", rate=_RATE)
            stream.layout = "mono"
            stream.bit_rate = bitrate
            pts = 0
            remaining = last - first
            while remaining > 0:
                count = min(_FRAME * 50, remaining)
                samples = np.frombuffer(source.readframes(count), dtype="<i2")
                if samples.size == 0:
                    break
                remaining -= samples.size
                frame = av.AudioFrame.from_ndarray(
                    samples.reshape(1, -1), format="s16", layout="mono"
                )
                frame.sample_rate = _RATE
                frame.pts = pts
                pts += samples.size
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
    return out.stat().st_size


def plan_chunks(
    wav: Path, max_seconds: float, *, search: float = 60.0
) -> list[tuple[float, float]]:
    """Cut ``wav`` into ``(start, end)`` stretches of at most ``max_seconds``, at quiet places.

    Each cut is the centre of the quietest :data:`WINDOW` (lowest RMS) within the last
    ``search`` seconds before the limit, so speech is cut only when there is no pause at all.

    Returns:
        Consecutive stretches covering the whole recording; one stretch when it fits.
    """
    with wave.open(str(wav), "rb") as source:
        total = source.getnframes() / _RATE
        if total <= max_seconds:
            return [(0.0, total)]
        step = round(WINDOW * _RATE)
        levels: list[float] = []
        while True:
            samples = np.frombuffer(source.readframes(step), dtype="<i2")
            if samples.size == 0:
                break
            wide = samples.astype(np.float64)
            levels.append(float(np.sqrt(np.mean(wide * wide))))
    search = min(search, max_seconds / 2)
    chunks: list[tuple[float, float]] = []
    start = 0.0
    while total - start > max_seconds:
        first = int((start + max_seconds - search) / WINDOW)
        last = int((start + max_seconds) / WINDOW)  # exclusive: the cut stays inside the limit
        window = levels[first:last]
        quietest = first + int(np.argmin(window)) if window else last
        cut = min(start + max_seconds, (quietest + 0.5) * WINDOW)
        chunks.append((start, cut))
        start = cut
    chunks.append((start, total))
    return chunks
