"""Throughput and peak memory of image variants: Conveyor vs the libvips floor vs Pillow.

Each method runs in its own child process (peak RSS from ``resource.getrusage`` there), over the
corpus photos, ``--repeat`` passes:

* ``conveyor``: :func:`conveyor.media.images.make_image_variants`, thumb + medium + preview, WebP.
* ``floor``: ``vipsthumbnail`` to one size (320) when the binary is on PATH, else
  ``pyvips.Image.thumbnail`` + WebP save for one size (the same work libvips' CLI does).
* ``pillow``: Pillow open, EXIF transpose, convert, then resize + WebP save for the three roles.

Run: ``.venv/bin/python bench/bench_images.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPUS = (Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "media").resolve()
SIZES = {"thumb": 320, "medium": 1280, "preview": 2560}
QUALITY = 80
SETS = {
    "jpeg": [
        *(f"exif-samples__landscape_{n}.jpg" for n in range(1, 9)),
        "exif-samples__Canon_40D.jpg",
        "exif-samples__DSCN0010.jpg",
        "lychee__mongolia",
        "pillow__app13-multiple.jpg",
        "pillow__pil_sample_cmyk.jpg",
    ],
    "hdr-avif-20mp": ["immich-test-assets__10bit-HDR-P3-nclx.avif"],
}


def _conveyor(files: list[Path], out: Path) -> int:
    from conveyor.media.images import make_image_variants

    for i, f in enumerate(files):
        make_image_variants(
            f, out / str(i), sizes=SIZES, image_format="webp", quality=QUALITY, max_pixels=10**9
        )
    return len(files)


def _floor(files: list[Path], out: Path) -> int:
    binary = shutil.which("vipsthumbnail")
    if binary:
        for i, f in enumerate(files):
            target = out / f"{i}.webp"
            subprocess.run(
                [binary, str(f), "--size", "320", "-o", f"{target}[Q={QUALITY}]"], check=True
            )
        return len(files)
    import pyvips

    for i, f in enumerate(files):
        pyvips.Image.thumbnail(str(f), 320).webpsave(str(out / f"{i}.webp"), Q=QUALITY)
    return len(files)


def _pillow(files: list[Path], out: Path) -> int:
    from PIL import Image, ImageOps

    for i, f in enumerate(files):
        with Image.open(f) as img:
            img.seek(0)
            upright = ImageOps.exif_transpose(img)
            mode = "RGBA" if "A" in upright.getbands() or "transparency" in upright.info else "RGB"
            base = upright.convert(mode)
        for role, size in SIZES.items():
            copy = base.copy()
            copy.thumbnail((size, size), Image.Resampling.LANCZOS)
            copy.save(out / f"{i}-{role}.webp", quality=QUALITY)
    return len(files)


METHODS = {"conveyor": _conveyor, "floor": _floor, "pillow": _pillow}


def _worker(method: str, names: list[str], repeat: int) -> None:
    files = [CORPUS / n for n in names]
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with tempfile.TemporaryDirectory() as tmp:
        METHODS[method](files[:1], Path(tmp))  # warm-up: imports, codec init
        started = time.perf_counter()
        done = sum(METHODS[method](files, Path(tmp)) for _ in range(repeat))
        elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        json.dumps(
            {
                "images": done,
                "seconds": elapsed,
                "peak_rss_mb": max(peak, children) / 1024,
                "start_rss_mb": baseline / 1024,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", choices=sorted(METHODS))
    parser.add_argument("--files", nargs="*", default=[])
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.files, args.repeat)
        return
    floor_kind = (
        "vipsthumbnail"
        if shutil.which("vipsthumbnail")
        else "pyvips thumbnail (no vipsthumbnail on PATH)"
    )
    print(f"floor = {floor_kind}, one size (320); conveyor and pillow = three roles")
    for set_name, names in SETS.items():
        results = {}
        for method in METHODS:
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    method,
                    "--repeat",
                    str(args.repeat),
                    "--files",
                    *names,
                ],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                results[method] = None
                print(f"  {set_name:14} {method:9} failed: {proc.stderr.strip().splitlines()[-1]}")
                continue
            results[method] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"\n{set_name} ({len(names)} files × {args.repeat})")
        print(f"  {'method':9} {'img/s':>8} {'peak RSS MB':>12} {'vs conveyor':>12}")
        mine = results.get("conveyor")
        for method, r in results.items():
            if r is None:
                continue
            rate = r["images"] / r["seconds"]
            ratio = f"{rate / (mine['images'] / mine['seconds']):.2f}×" if mine else "-"
            print(f"  {method:9} {rate:8.1f} {r['peak_rss_mb']:12.0f} {ratio:>12}")


if __name__ == "__main__":
    main()
