"""One measured task in a fresh interpreter: ``python -m bench.worker TASK JSON``.

Imports happen before the clock starts; the task prints ``{"seconds": ..., ...}`` as its last
line. The parent reads peak RSS from outside (``bench.measure``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIZES = {"thumb": 320, "medium": 1280, "preview": 2560}
QUALITY = 80


def _start() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _elapsed(started: tuple[float, float]) -> dict[str, float]:
    """Wall and CPU seconds (all threads of this process) since ``started``."""
    return {
        "seconds": time.perf_counter() - started[0],
        "cpu_seconds": time.process_time() - started[1],
    }


def images_conveyor(files: list[str], out: str) -> dict[str, Any]:
    """Conveyor's variants step: three roles from one decode, WebP."""
    from conveyor.media.images import make_image_variants

    started = _start()
    for index, name in enumerate(files):
        make_image_variants(
            Path(name),
            Path(out) / str(index),
            sizes=SIZES,
            image_format="webp",
            quality=QUALITY,
            max_pixels=10**9,
        )
    return _elapsed(started)


def images_pyvips(files: list[str], out: str) -> dict[str, Any]:
    """libvips' own floor: ``thumbnail`` + WebP save per size, as ``vipsthumbnail`` does."""
    import pyvips

    started = _start()
    for index, name in enumerate(files):
        for role, size in SIZES.items():
            image = pyvips.Image.thumbnail(name, size, height=size, size="down")
            image.webpsave(str(Path(out) / f"{index}-{role}.webp"), Q=QUALITY, keep="none")
    return _elapsed(started)


def images_pillow(files: list[str], out: str) -> dict[str, Any]:
    """What a Python user would write: Pillow open, EXIF transpose, three thumbnails, WebP."""
    import pillow_heif
    from PIL import Image, ImageOps

    pillow_heif.register_heif_opener()
    started = _start()
    for index, name in enumerate(files):
        with Image.open(name) as img:
            img.seek(0)
            upright = ImageOps.exif_transpose(img)
            mode = "RGBA" if "A" in upright.getbands() or "transparency" in upright.info else "RGB"
            base = upright.convert(mode)
        for role, size in SIZES.items():
            copy = base.copy()
            copy.thumbnail((size, size), Image.Resampling.LANCZOS)
            copy.save(Path(out) / f"{index}-{role}.webp", quality=QUALITY)
    return _elapsed(started)


def video_conveyor(src: str, out: str) -> dict[str, Any]:
    """Conveyor's video steps: probe, poster, playback (the settings' defaults)."""
    from conveyor.config import MediaSettings
    from conveyor.media.video import extract_poster, make_playback, probe_video

    s = MediaSettings()
    started = _start()
    info = probe_video(Path(src))
    extract_poster(Path(src), Path(out) / "poster.jpg", info)
    playback = make_playback(
        Path(src),
        Path(out) / "playback.mp4",
        info,
        max_height=s.playback_max_height,
        max_bitrate=s.playback_max_bitrate,
        crf=s.playback_crf,
        audio_bitrate=s.playback_audio_bitrate,
    )
    return {
        **_elapsed(started),
        "remuxed": playback.remuxed,
        "duration": info.duration,
        "height": playback.height,
        "has_audio": info.has_audio,
    }


def audio_conveyor(src: str, out: str) -> dict[str, Any]:
    """Conveyor's normalize step: any audio → 16 kHz mono s16 WAV with levels."""
    from conveyor.audio.normalize import normalize_audio

    started = _start()
    result = normalize_audio(Path(src), Path(out) / "out.wav")
    return {**_elapsed(started), "duration": result.duration}


def audio_pyav(src: str, out: str) -> dict[str, Any]:
    """PyAV's floor: demux, decode, resample to s16/mono/16 kHz, append raw bytes to a file."""
    import av

    started = _start()
    samples = 0
    with av.open(src) as container, (Path(out) / "out.raw").open("wb") as sink:
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16_000)
        for frame in container.decode(stream):
            for chunk in resampler.resample(frame):
                sink.write(bytes(chunk.planes[0])[: chunk.samples * 2])
                samples += chunk.samples
        for chunk in resampler.resample(None):
            sink.write(bytes(chunk.planes[0])[: chunk.samples * 2])
            samples += chunk.samples
    return {**_elapsed(started), "duration": samples / 16_000}


def pipeline(photo: str, items: int, out: str) -> dict[str, Any]:
    """The variants step run by the engine (SQLite) vs the same function called directly."""
    from conveyor.config import MediaSettings, PipelineSettings
    from conveyor.db.engine import make_engine
    from conveyor.db.migrate import upgrade
    from conveyor.media.albums import create_album
    from conveyor.media.domain import SHORT_LANE, MediaSteps, build_media_domain
    from conveyor.media.images import make_image_variants
    from conveyor.media.intake import accept_media
    from conveyor.objects import LocalStore
    from conveyor.pipeline import Executor
    from conveyor.testing import FakeClock

    media = MediaSettings()
    root = Path(out)
    engine = make_engine(f"sqlite:///{root / 'bench.db'}")
    upgrade(engine)
    store = LocalStore(root / "store")
    clock = FakeClock()
    album = create_album(engine, clock, owner="bench", name="bench")
    for _ in range(items + 1):  # one more to warm up (lazy imports, first statements)
        accept_media(
            engine,
            store,
            clock,
            Path(photo),
            album_id=album,
            owner="bench",
            max_pixels=media.max_pixels,
        )
    domain = build_media_domain(MediaSteps(store, media))
    executor = Executor(engine, clock, PipelineSettings(workers=0))
    executor.run_once(domain, SHORT_LANE)  # the warm-up item
    started = time.perf_counter()
    steps = 0
    while executor.run_once(domain, SHORT_LANE):
        steps += 1
    engine_seconds = time.perf_counter() - started
    sizes = {"thumb": media.thumb_size, "medium": media.medium_size, "preview": media.preview_size}
    started = time.perf_counter()
    for index in range(-1, items):  # -1: the warm-up call, not timed
        if index == 0:
            started = time.perf_counter()
        make_image_variants(
            Path(photo),
            root / "direct" / str(index),
            sizes=sizes,
            image_format=media.image_format,
            quality=media.image_quality,
            max_pixels=media.max_pixels,
        )
    direct_seconds = time.perf_counter() - started
    return {
        "seconds": engine_seconds,
        "steps": steps,
        "engine_seconds": engine_seconds,
        "direct_seconds": direct_seconds,
    }


TASKS: dict[str, Callable[..., dict[str, Any]]] = {
    "images_conveyor": images_conveyor,
    "images_pyvips": images_pyvips,
    "images_pillow": images_pillow,
    "video_conveyor": video_conveyor,
    "audio_conveyor": audio_conveyor,
    "audio_pyav": audio_pyav,
    "pipeline": pipeline,
}


def main() -> None:
    task, raw = sys.argv[1], sys.argv[2]
    kwargs = json.loads(raw)
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as tmp:
        kwargs.setdefault("out", tmp)
        print(json.dumps(TASKS[task](**kwargs)))


if __name__ == "__main__":
    main()
