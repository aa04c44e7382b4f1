"""Inputs the corpus does not have: a 60 s 1080p phone-like clip and hour-long recordings.

Made with PyAV once and kept in the cache folder (``--cache``), so later runs reuse them.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

__all__ = ["clip_1080p", "phone_jpegs", "recording"]

_RATE = 48_000
_BLOCK = 10 * 60  # seconds of audio encoded once; longer recordings repeat its packets


def clip_1080p(cache: Path, seconds: int = 60) -> Path:
    """H.264 High 1920×1080 30 fps at ~12 Mbit/s with stereo AAC: above the playback bitrate
    cap, so Conveyor re-encodes it as it would a phone's clip."""
    path = cache / f"clip-1080p-{seconds}s.mp4"
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    width, height, fps = 1920, 1080, 30
    y, x = np.mgrid[0:height, 0:width]
    base = np.zeros((height, width, 3), np.uint8)
    base[..., 0] = (x * 255 // (width - 1)).astype(np.uint8)
    base[..., 1] = (y * 255 // (height - 1)).astype(np.uint8)
    noise = np.random.default_rng(7).integers(0, 40, (height, width, 3), dtype=np.uint8)
    with av.open(str(tmp), "w", format="mp4") as out:
        video = out.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.bit_rate = 12_000_000
        video.codec_context.options = {"preset": "ultrafast", "profile": "high"}
        sound = out.add_stream("aac", rate=_RATE)
        sound.layout = "stereo"
        for index in range(seconds * fps):
            rgb = base.copy()
            rgb[..., 2] = (index * 3) % 256
            shift = (index * 16) % width
            rgb[: height // 3, shift : shift + width // 6] = 255
            rgb += np.roll(noise, index * 5, axis=1)  # texture the encoder has to spend bits on
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, fps)
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        for start, chunk in _tone_chunks(seconds, channels=2):
            chunk.pts = start
            out.mux(sound.encode(chunk))
        out.mux(sound.encode(None))
    tmp.rename(path)
    return path


def phone_jpegs(cache: Path, corpus: Path) -> list[Path]:
    """Four 12 MP (4032×3024) JPEGs at quality 92, as phones write them: corpus photos scaled
    up, so the variants step has to shrink them (the corpus JPEGs are all below 1.2 MP)."""
    import pyvips

    names = ["lychee__mongolia", "exif-samples__DSCN0010.jpg"]
    paths = []
    for index in range(4):
        path = cache / f"phone-12mp-{index}.jpg"
        paths.append(path)
        if path.is_file():
            continue
        cache.mkdir(parents=True, exist_ok=True)
        image = pyvips.Image.new_from_file(str(corpus / names[index % len(names)]))
        image = image.resize(4032 / image.width, vscale=3024 / image.height, kernel="cubic")
        if index >= 2:
            image = image.flip("horizontal")
        image.jpegsave(str(path.with_suffix(".part")), Q=92)
        path.with_suffix(".part").rename(path)
    return paths


def recording(cache: Path, hours: float) -> Path:
    """A stereo 48 kHz AAC-LC M4A of ``hours`` (a phone's recorder writes this kind).

    Ten minutes of a speech-like signal are encoded once; longer recordings repeat its packets
    with shifted timestamps, which costs a copy, not an encode.
    """
    path = cache / f"recording-{hours:g}h.m4a"
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    block = cache / f"recording-block-{_BLOCK}s.m4a"
    if not block.is_file():
        tmp = block.with_suffix(".part")
        with av.open(str(tmp), "w", format="mp4") as out:
            sound = out.add_stream("aac", rate=_RATE)
            sound.layout = "stereo"
            sound.bit_rate = 128_000
            for start, chunk in _tone_chunks(_BLOCK, channels=2):
                chunk.pts = start
                out.mux(sound.encode(chunk))
            out.mux(sound.encode(None))
        tmp.rename(block)
    repeats = max(1, round(hours * 3600 / _BLOCK))
    tmp = path.with_suffix(".part")
    with av.open(str(tmp), "w", format="mp4") as out:
        stream = None
        offset = 0
        for _ in range(repeats):
            with av.open(str(block)) as inp:
                source = inp.streams.audio[0]
                if stream is None:
                    stream = out.add_stream_from_template(source)
                first: int | None = None
                last = 0
                for packet in inp.demux(source):
                    if packet.dts is None or packet.pts is None:
                        continue
                    first = packet.dts if first is None else first
                    last = max(last, packet.pts + (packet.duration or 0))
                    packet.pts += offset
                    packet.dts += offset
                    packet.stream = stream
                    out.mux(packet)
                offset += last - (first or 0)  # the encoder's priming packet starts below 0
    tmp.rename(path)
    return path


def _tone_chunks(seconds: int, *, channels: int) -> Iterator[tuple[int, av.AudioFrame]]:
    """(first sample, frame) of 1024-sample fltp frames: syllable-like bursts of two tones."""
    rng = np.random.default_rng(11)
    total = seconds * _RATE
    for start in range(0, total, 1024):
        n = min(1024, total - start)
        t = np.arange(start, start + n, dtype=np.float64) / _RATE
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3.0 * t)  # ~3 syllables a second
        voice = np.sin(2 * np.pi * 220 * t) + 0.5 * np.sin(2 * np.pi * 660 * t)
        signal = (0.2 * envelope * voice + 0.01 * rng.standard_normal(n)).astype(np.float32)
        planes = np.repeat(signal[np.newaxis, :], channels, axis=0)
        layout = "stereo" if channels == 2 else "mono"
        frame = av.AudioFrame.from_ndarray(planes, format="fltp", layout=layout)
        frame.sample_rate = _RATE
        yield start, frame
