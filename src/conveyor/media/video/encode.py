"""Encoders of the playback: decoded frames → upright H.264 (yuv420p) and AAC packets (NORMS M3).

Timestamps are rewritten on the way: video in 1/90000 (exact for 1/600, 24/25/30/50/60 fps and
MPEG-TS sources, so variable frame rate survives without rounding drift), strictly increasing,
each packet carrying its frame's duration; audio re-timed continuously from the first sample.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from typing import Any

import av
import numpy as np

from conveyor.media.video.probe import VideoInfo

__all__ = ["TICKS", "AudioPath", "VideoPath", "target_size"]

TICKS = 90_000
"""Output video time base is 1/TICKS s (see the module docstring)."""

_AAC_RATES = frozenset({96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000})
_AAC_FRAME = 1024  # samples per AAC-LC frame


def target_size(info: VideoInfo, max_height: int) -> tuple[int, int]:
    """(width, height) of the playback: upright, height at most ``max_height``, both even."""
    width, height = float(info.width), float(info.height)
    if height > max_height:
        width, height = width * max_height / height, float(max_height)
    # x264 with yuv420p needs even sides; round down so max_height is never exceeded.
    return max(2, int(width) // 2 * 2), max(2, int(height) // 2 * 2)


def _rotate_filters(rotation: int) -> list[tuple[str, str | None]]:
    filters: dict[int, list[tuple[str, str | None]]] = {
        0: [],
        90: [("transpose", "clock")],
        180: [("hflip", None), ("vflip", None)],
        270: [("transpose", "cclock")],
    }
    return filters[rotation]


class VideoPath:
    """Decoded frame -> upright, scaled yuv420p frame with pts in 1/90000 -> H.264 packets."""

    def __init__(
        self,
        out: Any,
        inp: Any,
        info: VideoInfo,
        size: tuple[int, int],
        t0: float,
        *,
        max_bitrate: int,
        crf: int,
    ) -> None:
        self._inp = inp
        self._rotation = info.rotation
        self._size = size
        self._t0 = t0
        self._end = round(info.duration * TICKS)
        rate = inp.average_rate or inp.guessed_rate or Fraction(30)
        if not 1 <= rate <= 240:
            rate = Fraction(30)
        self._step = max(1, round(TICKS / rate))
        self.stream = out.add_stream("libx264", rate=rate.limit_denominator(1001))
        self.stream.width, self.stream.height = size
        self.stream.pix_fmt = "yuv420p"
        self.stream.time_base = Fraction(1, TICKS)
        self.stream.codec_context.time_base = Fraction(1, TICKS)
        self.stream.codec_context.options = {
            "preset": "veryfast",
            "profile": "high",
            "crf": str(crf),
            "maxrate": str(max_bitrate),
            "bufsize": str(2 * max_bitrate),
        }
        # PyAV opens encoders with slice threads, which libx264 takes as "sliced threads": lower
        # latency we do not need, slower and larger output. Frame threads are ffmpeg's default.
        self.stream.codec_context.thread_type = "FRAME"
        # The scale filter converts full range (yuvj420p) to limited but keeps the YUV matrix,
        # so the source's colour tags stay true; copying them lets players pick the same matrix.
        source, target = inp.codec_context, self.stream.codec_context
        target.color_range = 1  # MPEG / limited range
        # Anamorphic sources (DVD 720×576 at 16:9, HDV/AVCHD 1440×1080) keep their pixel shape;
        # a quarter turn swaps the pixel's sides.
        aspect = source.sample_aspect_ratio
        if aspect and aspect > 0 and aspect != 1:
            target.sample_aspect_ratio = 1 / aspect if info.rotation in (90, 270) else aspect
        for name in ("colorspace", "color_primaries", "color_trc"):
            value = getattr(source, name)
            if value not in (None, 2):  # 2 = unspecified
                setattr(target, name, value)
        self._graph: Any | None = None
        self._graph_key: tuple[int, int, str] | None = None
        self._last_pts = -1
        self._durations: dict[int, int] = {}
        self._pending: deque[tuple[int, int]] = deque()
        self.deinterlaced = False  # an interlaced source was deinterlaced
        self.frames = 0
        self.end = 0  # end of the last frame, 1/90000 s

    def _build_graph(self, frame: Any) -> Any:
        graph = av.filter.Graph()
        nodes = [
            graph.add_buffer(
                width=frame.width,
                height=frame.height,
                format=frame.format.name,
                time_base=self._inp.time_base,
            )
        ]
        if frame.interlaced_frame:
            # Camcorders (AVCHD), DVDs and broadcast recordings store fields; a browser shows
            # them as combs. bwdif makes one frame per frame (field order from each frame), and
            # leaves a progressive frame of a mixed source as it is.
            nodes.append(graph.add("bwdif", "mode=send_frame:parity=auto:deint=interlaced"))
            self.deinterlaced = True
        for name, args in _rotate_filters(self._rotation):
            nodes.append(graph.add(name, args))
        width, height = self._size
        nodes.append(graph.add("scale", f"{width}:{height}:flags=bicubic:out_range=tv"))
        nodes.append(graph.add("format", "yuv420p"))
        nodes.append(graph.add("buffersink"))
        graph.link_nodes(*nodes).configure()
        return graph

    def encode(self, frame: Any | None) -> list[Any]:
        if frame is None:
            packets = self._flush_graph()
            return packets + self._timed(list(self.stream.encode(None)))
        key = (int(frame.width), int(frame.height), str(frame.format.name))
        packets = []
        if self._graph is None or key != self._graph_key:
            packets = self._flush_graph()
            self._graph, self._graph_key = self._build_graph(frame), key
        seconds = frame.time
        if seconds is None:
            pts = self._last_pts + self._step
        else:
            pts = max(0, round((seconds - self._t0) * TICKS))
        pts = max(pts, self._last_pts + 1)  # strictly increasing, whatever the source says
        self._last_pts = pts
        duration = self._step
        if frame.duration and frame.time_base:
            duration = round(frame.duration * frame.time_base * TICKS)
        # QuickTime sample tables may give the last frame a long duration that the edit list
        # cuts (train.mov: 0.87 s of a 1.23 s clip); the shown end is the container's.
        duration = max(1, min(duration, self._end - pts))
        # A deinterlacer holds a frame back to see the next: outputs take their times in order.
        self._pending.append((pts, duration))
        self._graph.push(frame)
        return packets + self._pull()

    def _pull(self) -> list[Any]:
        """Encode what the filter graph has ready, each with the time of its input frame."""
        assert self._graph is not None
        packets: list[Any] = []
        while True:
            try:
                upright = self._graph.pull()
            except (BlockingIOError, av.EOFError):
                break
            if not self._pending:
                continue
            pts, duration = self._pending.popleft()
            upright.pts = pts
            upright.time_base = Fraction(1, TICKS)
            self._durations[pts] = duration
            self.end = max(self.end, pts + duration)
            packets.extend(self.stream.encode(upright))
            self.frames += 1
        return self._timed(packets)

    def _flush_graph(self) -> list[Any]:
        """Send the end of stream through the graph (a frame held back comes out) and drop it."""
        if self._graph is None:
            return []
        self._graph.push(None)
        packets = self._pull()
        self._graph, self._graph_key = None, None
        self._pending.clear()
        return packets

    def _timed(self, packets: list[Any]) -> list[Any]:
        # libx264 leaves packet durations at 0 and the muxer then guesses the last frame's
        # length; give each packet its frame's duration so the track ends where the source does.
        for packet in packets:
            if packet.pts is not None:
                packet.duration = self._durations.pop(packet.pts, self._step)
        return packets


class AudioPath:
    """Decoded audio -> AAC (source rate or 48 kHz, mono or stereo) with continuous pts."""

    def __init__(self, out: Any, inp: Any, t0: float, bit_rate: int) -> None:
        rate = int(inp.codec_context.sample_rate)
        self._rate = rate if rate in _AAC_RATES else 48_000
        channels = inp.codec_context.layout.nb_channels
        layout = "mono" if channels == 1 else "stereo"
        self._layout, self._channels = layout, 1 if layout == "mono" else 2
        self._t0 = t0
        self.stream = out.add_stream("aac", rate=self._rate)
        self.stream.layout = layout
        self.stream.format = "fltp"
        self.stream.bit_rate = bit_rate
        self.stream.time_base = Fraction(1, self._rate)
        self.stream.codec_context.time_base = Fraction(1, self._rate)
        self._resampler = av.AudioResampler(format="fltp", layout=layout, rate=self._rate)
        self._fifo = av.AudioFifo()
        self._next_pts: int | None = None

    def encode(self, frame: Any | None, *, end: float | None = None) -> list[Any]:
        """AAC packets for ``frame``; None flushes, padding with silence up to ``end`` seconds."""
        if self._next_pts is None:
            if frame is None:
                return []
            start = frame.time - self._t0 if frame.time is not None else 0.0
            self._next_pts = max(0, round(start * self._rate))
        for resampled in self._resampler.resample(frame):
            resampled.pts = None  # the fifo re-times; gaps in the source are closed up
            self._fifo.write(resampled)
        if frame is None and end is not None and self._next_pts is not None:
            # A source whose audio stops before its video (fire2.mp4: 2.26 s of 2.38 s) gets
            # silence up to the video's end, so both tracks end together.
            missing = round(end * self._rate) - self._next_pts - self._fifo.samples
            if missing > 0:
                silence = np.zeros((self._channels, missing), dtype=np.float32)
                pad = av.AudioFrame.from_ndarray(silence, format="fltp", layout=self._layout)
                pad.sample_rate = self._rate
                self._fifo.write(pad)
        packets: list[Any] = []
        while self._fifo.samples >= _AAC_FRAME or (frame is None and self._fifo.samples):
            chunk = self._fifo.read(min(_AAC_FRAME, self._fifo.samples))
            if chunk is None:
                break
            chunk.pts = self._next_pts
            chunk.time_base = Fraction(1, self._rate)
            self._next_pts += chunk.samples
            packets.extend(self.stream.encode(chunk))
        if frame is None:
            packets.extend(self.stream.encode(None))
        return packets
