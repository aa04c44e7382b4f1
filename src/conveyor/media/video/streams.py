"""Opening a video file with PyAV and finding the streams every video step works on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av

from conveyor.errors import MediaError
from conveyor.media.halts import MediaHalt

__all__ = ["audio_stream", "decode_packets", "open_source", "open_video", "video_stream"]


def open_source(src: Path) -> Any:
    """``av.open`` of ``src`` for reading (the caller closes it).

    Raises:
        MediaError: ``undecodable`` when FFmpeg cannot open it.
    """
    try:
        return av.open(str(src), metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise MediaError(
            MediaHalt.UNDECODABLE, f"{src.name} is not a readable media file: {exc}"
        ) from exc


def open_video(src: Path) -> tuple[Any, Any]:
    """Open ``src`` and find its video stream (the container is the caller's to close).

    Raises:
        MediaError: ``undecodable`` when it does not open, ``not_video`` with no video track.
    """
    container = open_source(src)
    video = video_stream(container)
    if video is None:
        container.close()
        raise MediaError(MediaHalt.NOT_VIDEO, f"{src.name} has no video track")
    return container, video


def video_stream(container: Any) -> Any | None:
    """The first video stream that is not cover art (an attached picture), else None."""
    attached = av.stream.Disposition.attached_pic
    for stream in container.streams.video:
        if not stream.disposition & attached:
            return stream
    return None


def audio_stream(container: Any) -> Any | None:
    """The first audio stream with a decoder and a sample rate, else None."""
    for stream in container.streams.audio:
        if stream.codec_context is not None and stream.codec_context.sample_rate:
            return stream
    return None


def decode_packets(packets: Iterator[Any]) -> Iterator[Any]:
    """Frames of ``packets``; a packet that fails to decode is skipped (partial streams)."""
    for packet in packets:
        try:
            frames = packet.decode()
        except av.FFmpegError:
            continue
        yield from frames
