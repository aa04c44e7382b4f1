"""The browser playback of a video: H.264/AAC MP4, faststart, upright (NORMS M3, M8).

:func:`make_playback` writes an MP4 with ``moov`` before ``mdat`` (faststart) that every browser
plays: frames physically turned upright, bounded height and bitrate, variable frame rate kept,
audio re-timed so both tracks end where the source ends (:mod:`~conveyor.media.video.encode`). A
source that already is such a file is stream-copied instead (``remuxed=True``), which costs a
fraction of a re-encode.

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

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av

from conveyor.errors import MediaError
from conveyor.files import atomic_path
from conveyor.media.halts import MediaHalt
from conveyor.media.video.encode import TICKS, AudioPath, VideoPath, target_size
from conveyor.media.video.probe import VideoInfo, container_duration
from conveyor.media.video.streams import audio_stream, open_source, video_stream

__all__ = ["Playback", "make_playback"]

_REMUX_PROFILES = frozenset({"Baseline", "Constrained Baseline", "Main", "High"})
_REMUX_SCAN_PACKETS = 300  # leading video packets checked for edit-list cuts before a remux
_PROGRESS_EVERY = 0.5  # seconds of work between two progress calls (heartbeat, M8)


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
        deinterlaced: True when the source's frames were interlaced and were deinterlaced.
    """

    path: Path
    width: int
    height: int
    duration: float
    size: int
    remuxed: bool
    deinterlaced: bool = False


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
    with atomic_path(dst) as tmp:
        report(0.0, force=True)
        remuxed = _can_remux(src, info, max_height=max_height, max_bitrate=max_bitrate)
        deinterlaced = False
        if remuxed:
            _remux(src, tmp, report)
        else:
            deinterlaced = _transcode(
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
    return Playback(dst, width, height, duration, size, remuxed, deinterlaced)


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
    with open_source(src) as container:
        video = video_stream(container)
        if video is None or video.profile not in _REMUX_PROFILES:
            return False
        audio = audio_stream(container)
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
    with open_source(src) as inp, _open_output(tmp) as out:
        video = video_stream(inp)
        if video is None:
            raise MediaError(MediaHalt.NOT_VIDEO, f"{src.name} has no video track")
        audio = audio_stream(inp)
        outputs = {video.index: out.add_stream_from_template(video)}
        if audio is not None:
            outputs[audio.index] = out.add_stream_from_template(audio)
        for packet in inp.demux([s for s in (video, audio) if s is not None]):
            if packet.dts is None:  # demuxer's end-of-stream marker
                continue
            report.at_time(float(packet.pts * packet.time_base) if packet.pts is not None else None)
            packet.stream = outputs[packet.stream.index]
            out.mux(packet)


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
) -> bool:
    """Re-encode ``src`` into ``tmp``; True when its frames were interlaced (deinterlaced)."""
    with open_source(src) as inp, _open_output(tmp) as out:
        video_in = video_stream(inp)
        if video_in is None:
            raise MediaError(MediaHalt.NOT_VIDEO, f"{src.name} has no video track")
        audio_in = audio_stream(inp)
        video_in.codec_context.thread_type = "AUTO"
        t0 = float(inp.start_time) / 1_000_000 if inp.start_time else 0.0
        video = VideoPath(
            out,
            video_in,
            info,
            target_size(info, max_height),
            t0,
            max_bitrate=max_bitrate,
            crf=crf,
        )
        audio = AudioPath(out, audio_in, t0, audio_bitrate) if audio_in is not None else None
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
            raise MediaError(MediaHalt.UNDECODABLE, f"no video frame of {src.name} decodes")
        out.mux(video.encode(None))
        if audio is not None:
            out.mux(audio.encode(None, end=video.end / TICKS))
        return video.deinterlaced


def _read_back(path: Path) -> tuple[int, int, float]:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        duration = container_duration(container, video)
        return int(video.codec_context.width), int(video.codec_context.height), duration
