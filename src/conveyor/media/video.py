"""Videos: probe, poster frame and browser playback (NORMS M1-M3, M8).

Three steps, each on a local file, with PyAV (FFmpeg) only:

* :func:`probe_video` reads the facts a video record needs (upright size, rotation, duration,
  codecs, capture time) and refuses what is not a video (``not_video``) or cannot be decoded
  (``undecodable``).
* :func:`extract_poster` writes an upright JPEG of a representative frame (not a black fade-in).
* :func:`make_playback` writes an H.264/AAC MP4 with ``moov`` before ``mdat`` (faststart) that
  every browser plays: frames physically turned upright, bounded height and bitrate, variable
  frame rate kept, audio re-timed so both tracks end where the source ends. A source that is
  already such a file is stream-copied instead (``remuxed=True``), which costs a fraction of a
  re-encode.

Decisions:

* **Rotation is never remuxed.** A source with a display matrix (phones write one for every
  portrait clip) is re-encoded with its frames turned, and the playback carries no matrix. Browsers
  do honour the MP4 matrix, but thumbnails drawn from ``<video>`` into a canvas, older players and
  the ``width``/``height`` we store would each need to apply it again; one physical orientation for
  every playback keeps all consumers simple. Phone clips are HEVC or above the bitrate cap so
  often that remuxing them would rarely apply anyway.
* **Partial streams play what decodes.** A file whose header promises more frames than decode
  (``file-type__fixture.mov``: an edit list starting 20 frames into a 25-frame stub) gets a
  playback of the frames that decode, with their own timestamps; packets that fail to decode are
  skipped. Only a file where no video frame decodes at all is ``undecodable``. Such sources are
  never remuxed: a source whose video packets carry negative timestamps (an edit list cuts them)
  is re-encoded so the playback holds only the frames that are shown.
* Sample aspect ratio is taken as square (true of phone and camera clips); anamorphic sources
  keep their stored pixel grid.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyvips

from conveyor.errors import MediaError

__all__ = ["Playback", "VideoInfo", "extract_poster", "make_playback", "probe_video"]

_TICKS = 90_000
"""Output video time base is 1/90000: exact for 1/600 (QuickTime), 24/25/30/50/60 fps and
MPEG-TS sources, so variable frame rate timestamps survive without rounding drift."""

_AAC_RATES = frozenset({96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000})
_AAC_FRAME = 1024  # samples per AAC-LC frame
_REMUX_PROFILES = frozenset({"Baseline", "Constrained Baseline", "Main", "High"})
_REMUX_SCAN_PACKETS = 300  # leading video packets checked for edit-list cuts before a remux
_IMAGE_FORMATS = frozenset({"image2", "gif", "apng", "webp", "avif"})
"""Demuxers of still or animated images: those files belong to the image pipeline, not here."""

_POSTER_POINTS = (0.0, 0.10, 0.25, 0.50)  # fractions of the duration tried for the poster
_POSTER_MIN_LUMA = 24.0  # mean luma (0-255) under which a frame counts as black / fade-in
_POSTER_MIN_STD = 8.0  # luma standard deviation under which a frame counts as flat
_POSTER_QUALITY = 90
_SEEK_FRAME_LIMIT = 600  # frames decoded after a seek before the nearest one is taken
_PROGRESS_EVERY = 0.5  # seconds of work between two progress calls (heartbeat, M8)


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`probe_video` learns about a video file.

    Attributes:
        width: upright display width in pixels (after the rotation below).
        height: upright display height in pixels.
        rotation: degrees clockwise the stored frames must turn to be upright: 0, 90, 180, 270.
        duration: seconds, from the container (the header's claim).
        video_codec: FFmpeg codec name, e.g. ``h264``, ``hevc``.
        audio_codec: FFmpeg codec name of the first audio track, None without audio.
        container: PyAV format name, e.g. ``mov,mp4,m4a,3gp,3g2,mj2``.
        mime_type: ``video/mp4``, ``video/quicktime``, ``video/webm``, ...
        has_audio: the file has an audio track.
        pix_fmt: pixel format of the decoded frames, e.g. ``yuv420p``, ``yuvj420p``.
        bit_rate: bits per second of the video track, else of the whole file; None if unknown.
        captured_at: capture time in UTC (``com.apple.quicktime.creationdate``, else the
            container's ``creation_time``), None when absent.
    """

    width: int
    height: int
    rotation: int
    duration: float
    video_codec: str
    audio_codec: str | None
    container: str
    mime_type: str
    has_audio: bool
    pix_fmt: str
    bit_rate: int | None
    captured_at: datetime | None


@dataclass(frozen=True)
class Playback:
    """The playback file :func:`make_playback` wrote.

    Attributes:
        path: the destination file.
        width: pixel width of the frames (upright, even).
        height: pixel height of the frames (upright, even, at most ``max_height``).
        duration: seconds.
        size: bytes.
        remuxed: True when the source streams were copied, not re-encoded.
    """

    path: Path
    width: int
    height: int
    duration: float
    size: int
    remuxed: bool


# --------------------------------------------------------------------------- probe


def probe_video(src: Path) -> VideoInfo:
    """Read the facts of a video file; decodes one frame to prove it is decodable.

    Args:
        src: a local file.

    Returns:
        The :class:`VideoInfo`, with upright dimensions.

    Raises:
        MediaError: ``not_video`` when the file has no video track (audio-only MP4, cover art
            only) or is a still/animated image; ``undecodable`` when it is empty, not media,
            corrupt, or no video frame decodes.
    """
    if not src.is_file() or src.stat().st_size == 0:
        raise MediaError("undecodable", f"{src.name} is empty or missing")
    container, video = _open_video(src)
    with container:
        first = _first_frame(container, video)
        if first is None:
            raise MediaError("undecodable", f"no video frame of {src.name} decodes")
        if set(container.format.name.split(",")) & _IMAGE_FORMATS:
            raise MediaError("not_video", f"{src.name} is an image, not a video")
        rotation = _rotation_of(first)
        width, height = int(first.width), int(first.height)
        if rotation in (90, 270):
            width, height = height, width
        audio = _audio_stream(container)
        bit_rate = int(video.codec_context.bit_rate or container.bit_rate or 0) or None
        return VideoInfo(
            width=width,
            height=height,
            rotation=rotation,
            duration=_duration_of(container, video),
            video_codec=str(video.codec_context.name),
            audio_codec=str(audio.codec_context.name) if audio is not None else None,
            container=str(container.format.name),
            mime_type=_mime_of(container, src),
            has_audio=audio is not None,
            pix_fmt=str(first.format.name),
            bit_rate=bit_rate,
            captured_at=_captured_at(container, video),
        )


def _video_stream(container: Any) -> Any | None:
    attached = av.stream.Disposition.attached_pic
    for stream in container.streams.video:
        if not stream.disposition & attached:
            return stream
    return None


def _audio_stream(container: Any) -> Any | None:
    for stream in container.streams.audio:
        if stream.codec_context is not None and stream.codec_context.sample_rate:
            return stream
    return None


def _decode_packets(packets: Iterator[Any]) -> Iterator[Any]:
    """Frames of ``packets``; a packet that fails to decode is skipped (partial streams)."""
    for packet in packets:
        try:
            frames = packet.decode()
        except av.FFmpegError:
            continue
        yield from frames


def _first_frame(container: Any, video: Any) -> Any | None:
    if video.codec_context is None:  # a stream whose codec this build cannot open
        return None
    video.codec_context.thread_type = "AUTO"
    try:
        for frame in _decode_packets(container.demux(video)):
            return frame
    except av.FFmpegError:
        return None
    return None


def _rotation_of(frame: Any) -> int:
    # PyAV gives the display matrix angle counter-clockwise in [-180, 180]; we store the
    # clockwise turn that makes the frame upright (FFmpeg's autorotate does the same).
    ccw = float(frame.rotation or 0)
    return round(-ccw / 90.0) % 4 * 90


def _duration_of(container: Any, video: Any) -> float:
    if container.duration:
        return float(container.duration) / 1_000_000
    if video.duration and video.time_base:
        return float(video.duration * video.time_base)
    return 0.0


def _mime_of(container: Any, src: Path) -> str:
    names = set(container.format.name.split(","))
    if "mov" in names or "mp4" in names:
        brand = str(container.metadata.get("major_brand", "")).strip()
        if brand == "qt":
            return "video/quicktime"
        if brand.startswith("3g2"):
            return "video/3gpp2"
        if brand.startswith("3gp"):
            return "video/3gpp"
        return "video/mp4"
    if "matroska" in names or "webm" in names:
        with src.open("rb") as fh:
            head = fh.read(64)
        return "video/webm" if b"webm" in head else "video/x-matroska"
    by_format = {
        "avi": "video/x-msvideo",
        "mpegts": "video/mp2t",
        "mpeg": "video/mpeg",
        "flv": "video/x-flv",
        "ogg": "video/ogg",
        "asf": "video/x-ms-asf",
    }
    for name in names:
        if name in by_format:
            return by_format[name]
    return "application/octet-stream"


def _captured_at(container: Any, video: Any) -> datetime | None:
    for metadata, key in (
        (container.metadata, "com.apple.quicktime.creationdate"),
        (container.metadata, "creation_time"),
        (video.metadata, "creation_time"),
    ):
        value = metadata.get(key)
        if not value:
            continue
        try:
            parsed = datetime.fromisoformat(str(value).strip())
        except ValueError:
            continue
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        # QuickTime writes 1904-01-01 (its epoch) or 1970 when the clock was never set.
        if parsed.year < 1971:
            continue
        return parsed.astimezone(UTC)
    return None


# --------------------------------------------------------------------------- poster


def extract_poster(src: Path, dst: Path, info: VideoInfo) -> tuple[int, int]:
    """Write an upright JPEG of a representative frame.

    The frames at 0 %, 10 %, 25 % and 50 % of the duration are tried in that order; the first
    that is neither dark nor flat wins, else the one with the most detail (luma variance).

    Args:
        src: the video file.
        dst: the JPEG to write (atomically: temporary file, then rename).
        info: the :func:`probe_video` result of ``src``.

    Returns:
        (width, height) of the poster in pixels, upright.

    Raises:
        MediaError: ``undecodable`` when no frame decodes.
    """
    frame = _pick_poster_frame(src, info)
    rgb = frame.to_ndarray(format="rgb24")
    upright = np.ascontiguousarray(np.rot90(rgb, k=-(info.rotation // 90)))
    height, width = int(upright.shape[0]), int(upright.shape[1])
    image = pyvips.Image.new_from_memory(upright.tobytes(), width, height, 3, "uchar")
    data: bytes = image.jpegsave_buffer(Q=_POSTER_QUALITY, optimize_coding=True, strip=True)
    tmp = _temp_path(dst)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return width, height


def _pick_poster_frame(src: Path, info: VideoInfo) -> Any:
    container, video = _open_video(src)
    with container:
        video.codec_context.thread_type = "AUTO"
        best: Any | None = None
        best_std = -1.0
        for point in _POSTER_POINTS:
            frame = _frame_near(container, video, point * info.duration, seek=point > 0)
            if frame is None:
                continue
            luma = frame.to_ndarray(format="gray").astype(np.float32)
            mean, std = float(luma.mean()), float(luma.std())
            if mean >= _POSTER_MIN_LUMA and std >= _POSTER_MIN_STD:
                return frame
            if std > best_std:
                best, best_std = frame, std
        if best is None:
            raise MediaError("undecodable", f"no video frame of {src.name} decodes")
        return best


def _frame_near(container: Any, video: Any, seconds: float, *, seek: bool) -> Any | None:
    """The first frame shown at or after ``seconds`` (else the last one before it)."""
    start = float(video.start_time * video.time_base) if video.start_time is not None else 0.0
    if seek:
        try:
            container.seek(int((start + seconds) / video.time_base), stream=video, backward=True)
        except av.FFmpegError:
            return None
    last = None
    try:
        for count, frame in enumerate(_decode_packets(container.demux(video))):
            if frame.time is None or frame.time - start >= seconds - 1e-3:
                return frame
            last = frame
            if count >= _SEEK_FRAME_LIMIT:
                break
    except av.FFmpegError:
        pass
    return last


# --------------------------------------------------------------------------- playback


def make_playback(
    src: Path,
    dst: Path,
    info: VideoInfo,
    *,
    max_height: int,
    max_bitrate: int,
    crf: int,
    audio_bitrate: int,
    progress: Callable[[float], None] | None = None,
) -> Playback:
    """Write a browser playback MP4: H.264 (yuv420p) + AAC, faststart, upright (NORMS M3).

    A source that already is H.264 yuv420p (Baseline/Main/High) with AAC (<= 2 channels) or no
    audio, in MP4/MOV, without rotation, with even dimensions, height <= ``max_height`` and video
    bitrate <= ``max_bitrate`` is stream-copied; every other one is re-encoded with libx264
    (preset veryfast, High profile, ``crf`` capped by ``maxrate=max_bitrate``) and AAC.

    Args:
        src: the video file.
        dst: the MP4 to write (atomically: temporary file in the same folder, then rename).
        info: the :func:`probe_video` result of ``src``.
        max_height: largest upright height in pixels; never upscaled.
        max_bitrate: video bitrate cap in bits per second.
        crf: x264 constant rate factor.
        audio_bitrate: AAC bitrate in bits per second.
        progress: called with the done fraction (0..1, non-decreasing) at least every half
            second of work; whatever it raises (e.g. ``ClaimLost``) aborts the job, and the
            temporary file is removed.

    Returns:
        The :class:`Playback` written.

    Raises:
        MediaError: ``undecodable`` when the source cannot be read or no video frame decodes.
    """
    report = _Progress(progress, info.duration)
    tmp = _temp_path(dst)
    try:
        report(0.0, force=True)
        remuxed = _can_remux(src, info, max_height=max_height, max_bitrate=max_bitrate)
        if remuxed:
            _remux(src, tmp, report)
        else:
            _transcode(
                src,
                tmp,
                info,
                max_height=max_height,
                max_bitrate=max_bitrate,
                crf=crf,
                audio_bitrate=audio_bitrate,
                report=report,
            )
        report(1.0, force=True)
        width, height, duration = _read_back(tmp)
        size = tmp.stat().st_size
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return Playback(dst, width, height, duration, size, remuxed)


class _Progress:
    """Rate-limited, non-decreasing progress reporting (the caller's heartbeat, M8)."""

    def __init__(self, callback: Callable[[float], None] | None, duration: float) -> None:
        self._callback = callback
        self._duration = duration
        self._last_call = time.monotonic()
        self._last_value = 0.0

    def at_time(self, seconds: float | None) -> None:
        if seconds is not None and self._duration > 0:
            self(seconds / self._duration)
        else:
            self(self._last_value)

    def __call__(self, fraction: float, *, force: bool = False) -> None:
        if self._callback is None:
            return
        value = max(self._last_value, min(1.0, max(0.0, fraction)))
        now = time.monotonic()
        due = now - self._last_call >= _PROGRESS_EVERY or value - self._last_value >= 0.1
        if not (force or due):
            return
        self._last_call, self._last_value = now, value
        self._callback(value)


def _temp_path(dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    return dst.with_name(f".{dst.name}.{uuid.uuid4().hex}.tmp")


def _open_video(src: Path) -> tuple[Any, Any]:
    """Open ``src`` and find its video stream (the container is the caller's to close).

    Raises:
        MediaError: ``undecodable`` when it does not open, ``not_video`` with no video track.
    """
    container = _open_source(src)
    video = _video_stream(container)
    if video is None:
        container.close()
        raise MediaError("not_video", f"{src.name} has no video track")
    return container, video


def _open_source(src: Path) -> Any:
    try:
        return av.open(str(src), metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise MediaError("undecodable", f"{src.name} is not a readable media file: {exc}") from exc


def _open_output(tmp: Path) -> Any:
    # faststart: the muxer rewrites the file at close so moov precedes mdat (progressive play).
    return av.open(str(tmp), "w", format="mp4", container_options={"movflags": "+faststart"})


def _can_remux(src: Path, info: VideoInfo, *, max_height: int, max_bitrate: int) -> bool:
    if not {"mov", "mp4"} & set(info.container.split(",")):
        return False
    if info.video_codec != "h264" or info.pix_fmt != "yuv420p" or info.rotation != 0:
        return False
    if info.height > max_height or info.width % 2 or info.height % 2:
        return False
    if info.bit_rate is None or info.bit_rate > max_bitrate:
        return False
    if info.has_audio and info.audio_codec != "aac":
        return False
    with _open_source(src) as container:
        video = _video_stream(container)
        if video is None or video.profile not in _REMUX_PROFILES:
            return False
        audio = _audio_stream(container)
        if audio is not None and audio.codec_context.layout.nb_channels > 2:
            return False
        # An edit list that cuts frames shows up as negative timestamps; copying those packets
        # would ship frames the source never shows (see the module docstring).
        # Edit lists cut at the start, so the first packets tell; no need to read the whole file.
        for count, packet in enumerate(container.demux(video)):
            if packet.pts is not None and packet.pts < (video.start_time or 0):
                return False
            if count >= _REMUX_SCAN_PACKETS:
                break
    return True


def _remux(src: Path, tmp: Path, report: _Progress) -> None:
    with _open_source(src) as inp, _open_output(tmp) as out:
        video = _video_stream(inp)
        if video is None:
            raise MediaError("not_video", f"{src.name} has no video track")
        audio = _audio_stream(inp)
        outputs = {video.index: out.add_stream_from_template(video)}
        if audio is not None:
            outputs[audio.index] = out.add_stream_from_template(audio)
        for packet in inp.demux([s for s in (video, audio) if s is not None]):
            if packet.dts is None:  # demuxer's end-of-stream marker
                continue
            report.at_time(float(packet.pts * packet.time_base) if packet.pts is not None else None)
            packet.stream = outputs[packet.stream.index]
            out.mux(packet)


def _target_size(info: VideoInfo, max_height: int) -> tuple[int, int]:
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


class _VideoPath:
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
        self._end = round(info.duration * _TICKS)
        rate = inp.average_rate or inp.guessed_rate or Fraction(30)
        if not 1 <= rate <= 240:
            rate = Fraction(30)
        self._step = max(1, round(_TICKS / rate))
        self.stream = out.add_stream("libx264", rate=rate.limit_denominator(1001))
        self.stream.width, self.stream.height = size
        self.stream.pix_fmt = "yuv420p"
        self.stream.time_base = Fraction(1, _TICKS)
        self.stream.codec_context.time_base = Fraction(1, _TICKS)
        self.stream.codec_context.options = {
            "preset": "veryfast",
            "profile": "high",
            "crf": str(crf),
            "maxrate": str(max_bitrate),
            "bufsize": str(2 * max_bitrate),
        }
        # The scale filter converts full range (yuvj420p) to limited but keeps the YUV matrix,
        # so the source's colour tags stay true; copying them lets players pick the same matrix.
        source, target = inp.codec_context, self.stream.codec_context
        target.color_range = 1  # MPEG / limited range
        for name in ("colorspace", "color_primaries", "color_trc"):
            value = getattr(source, name)
            if value not in (None, 2):  # 2 = unspecified
                setattr(target, name, value)
        self._graph: Any | None = None
        self._graph_key: tuple[int, int, str] | None = None
        self._last_pts = -1
        self._durations: dict[int, int] = {}
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
            return self._timed(list(self.stream.encode(None)))
        key = (int(frame.width), int(frame.height), str(frame.format.name))
        if self._graph is None or key != self._graph_key:
            self._graph, self._graph_key = self._build_graph(frame), key
        seconds = frame.time
        if seconds is None:
            pts = self._last_pts + self._step
        else:
            pts = max(0, round((seconds - self._t0) * _TICKS))
        pts = max(pts, self._last_pts + 1)  # strictly increasing, whatever the source says
        self._last_pts = pts
        duration = self._step
        if frame.duration and frame.time_base:
            duration = round(frame.duration * frame.time_base * _TICKS)
        # QuickTime sample tables may give the last frame a long duration that the edit list
        # cuts (train.mov: 0.87 s of a 1.23 s clip); the shown end is the container's.
        duration = max(1, min(duration, self._end - pts))
        self._graph.push(frame)
        packets: list[Any] = []
        while True:
            try:
                upright = self._graph.pull()
            except (BlockingIOError, av.EOFError):
                break
            upright.pts = pts
            upright.time_base = Fraction(1, _TICKS)
            self._durations[pts] = duration
            self.end = max(self.end, pts + duration)
            packets.extend(self.stream.encode(upright))
            self.frames += 1
        return self._timed(packets)

    def _timed(self, packets: list[Any]) -> list[Any]:
        # libx264 leaves packet durations at 0 and the muxer then guesses the last frame's
        # length; give each packet its frame's duration so the track ends where the source does.
        for packet in packets:
            if packet.pts is not None:
                packet.duration = self._durations.pop(packet.pts, self._step)
        return packets


class _AudioPath:
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


def _transcode(
    src: Path,
    tmp: Path,
    info: VideoInfo,
    *,
    max_height: int,
    max_bitrate: int,
    crf: int,
    audio_bitrate: int,
    report: _Progress,
) -> None:
    with _open_source(src) as inp, _open_output(tmp) as out:
        video_in = _video_stream(inp)
        if video_in is None:
            raise MediaError("not_video", f"{src.name} has no video track")
        audio_in = _audio_stream(inp)
        video_in.codec_context.thread_type = "AUTO"
        t0 = float(inp.start_time) / 1_000_000 if inp.start_time else 0.0
        video = _VideoPath(
            out,
            video_in,
            info,
            _target_size(info, max_height),
            t0,
            max_bitrate=max_bitrate,
            crf=crf,
        )
        audio = _AudioPath(out, audio_in, t0, audio_bitrate) if audio_in is not None else None
        inputs = [s for s in (video_in, audio_in) if s is not None]
        for packet in inp.demux(inputs):
            try:
                frames = packet.decode()
            except av.FFmpegError:
                continue  # partial stream: play what decodes (module docstring)
            for frame in frames:
                if packet.stream.index == video_in.index:
                    report.at_time(frame.time - t0 if frame.time is not None else None)
                    out.mux(video.encode(frame))
                elif audio is not None:
                    out.mux(audio.encode(frame))
        if video.frames == 0:
            raise MediaError("undecodable", f"no video frame of {src.name} decodes")
        out.mux(video.encode(None))
        if audio is not None:
            out.mux(audio.encode(None, end=video.end / _TICKS))


def _read_back(path: Path) -> tuple[int, int, float]:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        duration = _duration_of(container, video)
        return int(video.codec_context.width), int(video.codec_context.height), duration
