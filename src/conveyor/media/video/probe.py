"""What a video file is: upright size, rotation, duration, codecs, capture time (NORMS M1).

:func:`probe_video` refuses what is not a video (``not_video``: no video track, cover art only, a
still or animated image) and what cannot be decoded (``undecodable``), decoding one frame to
prove it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import av

from conveyor.errors import MediaError
from conveyor.media.halts import MediaHalt
from conveyor.media.video.avchd import mdpm_capture_time
from conveyor.media.video.streams import audio_stream, decode_packets, open_video

__all__ = ["VideoInfo", "capture_time", "container_duration", "probe_video"]

_IMAGE_FORMATS = frozenset({"image2", "gif", "apng", "webp", "avif"})
"""Demuxers of still or animated images: those files belong to the image pipeline, not here."""


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`probe_video` learns about a video file.

    Attributes:
        width: upright display width in pixels (after the rotation below).
        height: upright display height in pixels.
        rotation: degrees clockwise the stored frames must turn to be upright: 0, 90, 180, 270.
        duration: seconds: the container's claim, else (a WebM written live, a stream dump)
            measured from the end of the last packet of the video and audio streams.
        video_codec: FFmpeg codec name, e.g. ``h264``, ``hevc``.
        audio_codec: FFmpeg codec name of the first audio track, None without audio.
        container: PyAV format name, e.g. ``mov,mp4,m4a,3gp,3g2,mj2``.
        mime_type: ``video/mp4``, ``video/quicktime``, ``video/webm``, ...
        has_audio: the file has an audio track.
        pix_fmt: pixel format of the decoded frames, e.g. ``yuv420p``, ``yuvj420p``.
        bit_rate: bits per second of the video track, else of the whole file; None if unknown.
        captured_at: capture time in UTC (:func:`capture_time`), None when absent.
        captured_offset: the capture's zone in minutes east of UTC, None when unknown.
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
    captured_offset: int | None = None


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
        raise MediaError(MediaHalt.UNDECODABLE, f"{src.name} is empty or missing")
    container, video = open_video(src)
    with container:
        first = _first_frame(container, video)
        if first is None:
            raise MediaError(MediaHalt.UNDECODABLE, f"no video frame of {src.name} decodes")
        if set(container.format.name.split(",")) & _IMAGE_FORMATS:
            raise MediaError(MediaHalt.NOT_VIDEO, f"{src.name} is an image, not a video")
        rotation = _rotation_of(first)
        width, height = int(first.width), int(first.height)
        if rotation in (90, 270):
            width, height = height, width
        audio = audio_stream(container)
        bit_rate = int(video.codec_context.bit_rate or container.bit_rate or 0) or None
        captured_at, captured_offset = capture_time(container, video)
        if captured_at is None and video.codec_context.name == "h264":
            # AVCHD keeps its date in the stream, not the container.
            captured_at, captured_offset = mdpm_capture_time(src)
        return VideoInfo(
            width=width,
            height=height,
            rotation=rotation,
            duration=container_duration(container, video) or _measured_duration(src),
            video_codec=str(video.codec_context.name),
            audio_codec=str(audio.codec_context.name) if audio is not None else None,
            container=str(container.format.name),
            mime_type=_mime_of(container, src),
            has_audio=audio is not None,
            pix_fmt=str(first.format.name),
            bit_rate=bit_rate,
            captured_at=captured_at,
            captured_offset=captured_offset,
        )


def _first_frame(container: Any, video: Any) -> Any | None:
    if video.codec_context is None:  # a stream whose codec this build cannot open
        return None
    video.codec_context.thread_type = "AUTO"
    try:
        for frame in decode_packets(container.demux(video)):
            return frame
    except av.FFmpegError:
        return None
    return None


def _rotation_of(frame: Any) -> int:
    # PyAV gives the display matrix angle counter-clockwise in [-180, 180]; we store the
    # clockwise turn that makes the frame upright (FFmpeg's autorotate does the same).
    ccw = float(frame.rotation or 0)
    return round(-ccw / 90.0) % 4 * 90


def _measured_duration(src: Path) -> float:
    """Seconds from the first packet's start to the last one's end, over video and audio.

    For files whose header holds no duration (a MediaRecorder WebM, Matroska written live, raw
    stream dumps): the packets are demuxed, not decoded, so this reads the file once at disk speed.
    """
    container, video = open_video(src)
    with container:
        streams = [s for s in (video, audio_stream(container)) if s is not None]
        start: float | None = None
        end = 0.0
        try:
            for packet in container.demux(streams):
                stamp = packet.pts if packet.pts is not None else packet.dts
                if stamp is None or packet.time_base is None:
                    continue  # the demuxer's end-of-stream marker
                at = float(stamp * packet.time_base)
                start = at if start is None else min(start, at)
                end = max(end, at + float((packet.duration or 0) * packet.time_base))
        except av.FFmpegError:
            pass  # a damaged tail: the packets read so far give the duration
    return max(0.0, end - start) if start is not None else 0.0


def container_duration(container: Any, video: Any) -> float:
    """Seconds the container (else the video stream) declares; 0.0 when neither does."""
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


# Where containers keep the capture time, best first: QuickTime's local time with its zone
# (iPhones, many cameras), Matroska's DATE_RECORDED tag (may carry a zone), then the UTC
# creation time of the container and of the stream (MP4 mvhd/mdhd, Matroska DateUTC).
_CAPTURE_TAGS = (
    "com.apple.quicktime.creationdate",
    "DATE_RECORDED",
    "date_recorded",
    "creation_time",
)


def capture_time(container: Any, video: Any) -> tuple[datetime | None, int | None]:
    """(UTC instant, minutes east of UTC) of a video's capture from its tags; the zone is
    None unless the stamp carries one (``creation_time`` is UTC by definition: instant only).
    A stamp before 1971 (QuickTime's 1904 epoch, an unset clock) is no capture time."""
    for metadata in (container.metadata, video.metadata):
        for key in _CAPTURE_TAGS:
            value = metadata.get(key)
            if not value:
                continue
            try:
                parsed = datetime.fromisoformat(str(value).strip())
            except ValueError:
                continue
            offset: int | None = None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            elif key != "creation_time":
                delta = parsed.utcoffset()
                offset = None if delta is None else round(delta.total_seconds() / 60)
            if parsed.year < 1971:
                continue
            return parsed.astimezone(UTC), offset
    return None, None
