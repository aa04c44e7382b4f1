"""A video's poster: an upright JPEG of a representative frame, not a black fade-in (NORMS M1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import numpy as np
import pyvips

from conveyor.errors import MediaError
from conveyor.files import write_atomic
from conveyor.media.halts import MediaHalt
from conveyor.media.video.probe import VideoInfo
from conveyor.media.video.streams import decode_packets, open_video

__all__ = ["extract_poster"]

_POSTER_POINTS = (0.0, 0.10, 0.25, 0.50)  # fractions of the duration tried for the poster
_POSTER_MIN_LUMA = 24.0  # mean luma (0-255) under which a frame counts as black / fade-in
_POSTER_MIN_STD = 8.0  # luma standard deviation under which a frame counts as flat
_POSTER_QUALITY = 90
_SEEK_FRAME_LIMIT = 600  # frames decoded after a seek before the nearest one is taken


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
    if frame.interlaced_frame:
        rgb = _blend_fields(rgb)
    upright = np.ascontiguousarray(np.rot90(rgb, k=-(info.rotation // 90)))
    height, width = int(upright.shape[0]), int(upright.shape[1])
    image = pyvips.Image.new_from_memory(upright.tobytes(), width, height, 3, "uchar")
    data: bytes = image.jpegsave_buffer(Q=_POSTER_QUALITY, optimize_coding=True, strip=True)
    write_atomic(dst, data)
    return width, height


def _blend_fields(rgb: Any) -> Any:
    """Each row averaged with the next: an interlaced frame's two fields (taken 1/50 or 1/60 s
    apart) without the combs on moving edges, for a still that has no neighbours to borrow."""
    wide = rgb.astype(np.uint16)
    out = wide.copy()
    out[:-1] = (wide[:-1] + wide[1:] + 1) // 2
    return out.astype(np.uint8)


def _pick_poster_frame(src: Path, info: VideoInfo) -> Any:
    container, video = open_video(src)
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
            raise MediaError(MediaHalt.UNDECODABLE, f"no video frame of {src.name} decodes")
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
        for count, frame in enumerate(decode_packets(container.demux(video))):
            if frame.time is None or frame.time - start >= seconds - 1e-3:
                return frame
            last = frame
            if count >= _SEEK_FRAME_LIMIT:
                break
    except av.FFmpegError:
        pass
    return last
