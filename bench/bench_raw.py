"""``python -m bench.bench_raw``: one 24 MP camera RAW developed by Conveyor and by LibRaw itself.

The corpus has no RAW file, so a 6000×4000 12-bit RGGB DNG is written first (tests/support/raw.py:
smooth colour gradients under fine stripes and sensor noise, so the demosaic has detail to work
on). Then, interleaved ``--repeat`` times, the best of each:

* ``conveyor variants``: the whole photo step's image work, :func:`make_image_variants` with
  the bench's three sizes (320, 1280, 2560) to WebP: LibRaw's half-size decode (the largest
  role is under half the sensor), upright, sRGB, then the resizes and encodes;
* ``conveyor decode``: only its decode (:func:`conveyor.media.images.raw.decode_raw`);
* ``libraw postprocess``: ``rawpy.postprocess()`` with its defaults (full-size AHD demosaic,
  sRGB, 8 bits), LibRaw's own conversion.

The output is compared too: LibRaw's full conversion shrunk (libvips) to the size of Conveyor's
2560 px role, against that role: the mean absolute difference per channel (0-255) and the PSNR.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyvips
import rawpy

from conveyor.media.images import make_image_variants
from conveyor.media.images.raw import decode_raw
from tests.support.raw import WHITE, write_mosaic_dng

WIDTH, HEIGHT = 6000, 4000
SIZES = {"thumb": 320, "medium": 1280, "preview": 2560}


def _mosaic(seed: int = 7) -> np.ndarray[Any, np.dtype[np.uint16]]:
    """The sensor data, row band by row band (a float scene of 24 MP × 3 would be 0.5 GiB)."""
    rng = np.random.default_rng(seed)
    mosaic = np.empty((HEIGHT, WIDTH), dtype=np.uint16)
    x = np.arange(WIDTH) / WIDTH
    for top in range(0, HEIGHT, 500):
        y = (np.arange(top, top + 500) / HEIGHT)[:, None]
        stripes = 0.08 * np.sin(2 * np.pi * (np.arange(WIDTH) / 7.0 + y * 40))
        red = 0.15 + 0.6 * x * (1 - y) + stripes
        green = 0.2 + 0.5 * y + stripes
        blue = 0.1 + 0.6 * (1 - x) * y + stripes
        channel = np.empty((500, WIDTH))
        channel[0::2, 0::2] = red[0::2, 0::2]
        channel[0::2, 1::2] = green[0::2, 1::2]
        channel[1::2, 0::2] = green[1::2, 0::2]
        channel[1::2, 1::2] = blue[1::2, 1::2]
        channel += rng.normal(0, 0.01, channel.shape)
        mosaic[top : top + 500] = np.clip(channel * WHITE, 0, WHITE).astype(np.uint16)
    return mosaic


def _timed(work: Callable[[], Any]) -> tuple[float, float, Any]:
    started, cpu = time.perf_counter(), time.process_time()
    answer = work()
    return time.perf_counter() - started, time.process_time() - cpu, answer


def _compare(preview: np.ndarray[Any, Any], full: np.ndarray[Any, Any]) -> dict[str, Any]:
    """``full`` shrunk by libvips to ``preview``'s size: mean absolute difference per channel
    (0-255) and PSNR in dB."""
    reference = (
        pyvips.Image.new_from_array(np.ascontiguousarray(full))
        .copy(interpretation="srgb")
        .thumbnail_image(preview.shape[1], height=preview.shape[0], size="force")
        .numpy()
    )
    difference = np.abs(preview.astype(float) - reference.astype(float))
    mse = float((difference**2).mean())
    return {
        "mean_abs_difference_rgb": [
            round(float(v), 2) for v in difference.reshape(-1, 3).mean(axis=0)
        ],
        "psnr_db": round(10 * float(np.log10(255**2 / mse)), 1) if mse else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        dng = write_mosaic_dng(tmp / "24mp.dng", _mosaic(), orientation=1)
        size_mb = dng.stat().st_size / 2**20

        def conveyor() -> Any:
            return make_image_variants(
                dng, tmp / "out", sizes=SIZES, image_format="webp", quality=82, max_pixels=10**9
            )

        def decode() -> Any:
            return decode_raw(dng, "DNG", max(SIZES.values()), 10**9)

        def libraw() -> Any:
            with rawpy.imread(str(dng)) as raw:
                return raw.postprocess()

        methods = {
            "conveyor variants": conveyor,
            "conveyor decode": decode,
            "libraw postprocess": libraw,
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in methods}
        answers: dict[str, Any] = {}
        for _ in range(args.repeat):
            for name, work in methods.items():
                seconds, cpu, answers[name] = _timed(work)
                results[name].append((seconds, cpu))
        preview = pyvips.Image.new_from_file(str(tmp / "out" / "preview.webp")).numpy()
        with rawpy.imread(str(dng)) as raw:
            as_shot = raw.postprocess(use_camera_wb=True)
        compared = {
            "libraw defaults": _compare(preview, answers["libraw postprocess"]),
            "libraw defaults + camera white balance": _compare(preview, as_shot),
        }
        report = {
            "raw": f"{WIDTH}×{HEIGHT} 12-bit RGGB DNG, {size_mb:.0f} MiB",
            "load_average": [round(v, 1) for v in os.getloadavg()],
            "best": {
                name: {"seconds": round(min(r)[0], 3), "cpu": round(min(c for _, c in r), 3)}
                for name, r in results.items()
            },
            "output": {
                "conveyor preview": list(preview.shape),
                "libraw full": list(as_shot.shape),
                "against": compared,
            },
        }
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
