"""Helpers of the media domain tests: synthetic photos and videos, draining the lanes."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pyvips
from sqlalchemy import Engine

from conveyor.clock import Clock
from conveyor.config import MediaSettings, PipelineSettings
from conveyor.media.albums import create_album
from conveyor.media.domain import LONG_LANE, SHORT_LANE, MediaSteps, build_media_domain
from conveyor.media.intake import accept_media
from conveyor.objects import ObjectStore
from conveyor.pipeline import Domain, Executor

MEDIA = MediaSettings()
PIPELINE = PipelineSettings(
    workers=0,
    max_attempts=3,
    retry_base=0.05,
    retry_max=0.1,
    poll_interval=0.05,
    stop_grace=10.0,
)


def make_photo(path: Path, index: int, size: tuple[int, int] = (64, 48)) -> Path:
    """A small JPEG whose colour depends on ``index``."""
    width, height = size
    colour = [index % 256, (index * 7) % 256, 90]
    image = pyvips.Image.black(width, height, bands=3).new_from_image(colour)
    image.cast("uchar").jpegsave(str(path), Q=80)
    return path


def make_video(
    path: Path, *, width: int, height: int, seconds: float, fps: int = 25, codec: str = "mpeg4"
) -> Path:
    """A silent video of moving noise-free gradients (MPEG-4 Part 2: fast to write, never
    remuxable, so the playback step really transcodes)."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.zeros((height, width, 3), dtype=np.uint8)
    base[..., 0] = (x * 255 // max(1, width - 1)).astype(np.uint8)
    base[..., 1] = (y * 255 // max(1, height - 1)).astype(np.uint8)
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream(codec, rate=fps)
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.bit_rate = 4_000_000
        for index in range(round(seconds * fps)):
            rgb = base.copy()
            rgb[..., 2] = (index * 5) % 256
            shift = (index * 8) % width
            rgb[: height // 4, shift : shift + width // 8] = 255
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = index, Fraction(1, fps)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def media_domain(store: ObjectStore, settings: MediaSettings = MEDIA, **kw: float) -> Domain:
    """The media domain bound to ``store``."""
    return build_media_domain(MediaSteps(store, settings), **kw)


def drain(
    engine: Engine, domain: Domain, clock: Clock, lanes: tuple[str, ...] = (SHORT_LANE, LONG_LANE)
) -> int:
    """Run steps synchronously, short lane first, until no lane has work; returns steps run."""
    executor = Executor(engine, clock, PIPELINE)
    steps = 0
    while True:
        worked = False
        for lane in lanes:
            while executor.run_once(domain, lane):
                worked = True
                steps += 1
        if not worked:
            return steps


def album(engine: Engine, clock: Clock, name: str = "trip", owner: str = "ann") -> int:
    return create_album(engine, clock, owner=owner, name=name)


def add(
    engine: Engine,
    store: ObjectStore,
    clock: Clock,
    album_id: int,
    path: Path,
    owner: str = "ann",
    *,
    keep_duplicate: bool = True,
) -> int:
    """Accept ``path`` into the album; by default a second copy of a file is kept (the domain
    tests add one file several times; the tests of keeping each file once say otherwise)."""
    return accept_media(
        engine,
        store,
        clock,
        path,
        album_id=album_id,
        owner=owner,
        max_pixels=MEDIA.max_pixels,
        keep_duplicate=keep_duplicate,
    )
