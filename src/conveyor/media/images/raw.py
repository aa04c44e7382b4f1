"""Camera RAW photos (DNG, CR2, CR3, NEF, ARW, RAF, ORF, RW2, PEF, SRW) through LibRaw (rawpy).

A RAW file is the sensor's mosaic, not a picture: read as the TIFF or ISO media it also is, a
decoder finds only the small preview the camera embedded, so RAW is always named by its first
bytes (:func:`conveyor.objects.sniff.raw_format`) and decoded here, never passed off as that
preview. What LibRaw cannot decode is refused with a reason naming the format.

Decisions:

* **As shot**: the camera's white balance (``use_camera_wb``), LibRaw's default AHD
  demosaic, its sRGB output colour space from the camera's colour matrix (colour-managed like
  every other photo's variants) and its default brightness; the orientation the camera wrote
  (LibRaw's flip) is applied, so every variant is upright.
* **Shrink on load**: when the largest variant is at most half the sensor's size, LibRaw's
  ``half_size`` takes each 2×2 block of the mosaic as one pixel instead of demosaicing (about
  four times less work, and no demosaic artefacts survive the downscale anyway).
* **Capture time** from the file's EXIF, read with ExifRead (the same tags, zones and GPS
  fallback as any photo, :func:`~conveyor.media.images.header.capture_time_of`); where ExifRead
  finds none (CR3 keeps its EXIF in Canon boxes), LibRaw's own stamp, a local time with the zone
  unknown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import exifread
import numpy as np
import pyvips
import rawpy

from conveyor.errors import MediaError
from conveyor.media.halts import MediaHalt
from conveyor.media.images.header import ImageInfo, capture_time_of, too_many_pixels

__all__ = ["RAW_MIME", "decode_raw", "probe_raw", "raw_size"]

RAW_MIME: Final = {
    "DNG": "image/x-adobe-dng",
    "Canon CR2": "image/x-canon-cr2",
    "Canon CR3": "image/x-canon-cr3",
    "Nikon NEF": "image/x-nikon-nef",
    "Sony ARW": "image/x-sony-arw",
    "Fujifilm RAF": "image/x-fuji-raf",
    "Olympus ORF": "image/x-olympus-orf",
    "Panasonic RW2": "image/x-panasonic-rw2",
    "Pentax PEF": "image/x-pentax-pef",
    "Samsung SRW": "image/x-samsung-srw",
}
"""The MIME type an original of each RAW format (by :func:`~conveyor.objects.sniff.raw_format`'s
name) is stored with: the types the freedesktop shared MIME database gives them."""

# LibRaw's flip: 0 as stored, 3 half a turn, 5 a quarter turn counter-clockwise, 6 clockwise.
_QUARTER_TURNS: Final = (5, 6)


def _open(src: Path, fmt: str) -> Any:
    """``src`` opened by LibRaw (nothing decoded yet).

    Raises:
        MediaError: ``unsupported_media`` naming ``fmt`` when LibRaw does not know the file
            (a camera newer than this LibRaw, a variant it cannot read); ``undecodable`` when
            the file is damaged or truncated.
    """
    try:
        return rawpy.imread(str(src))
    except rawpy.LibRawFileUnsupportedError as exc:
        raise MediaError(
            MediaHalt.UNSUPPORTED_MEDIA,
            f"{src.name} is a {fmt} camera RAW file that LibRaw {_libraw()} cannot decode "
            f"({exc}); its small embedded preview is not passed off as the photo: add a JPEG, "
            "HEIC or TIFF export of it",
        ) from exc
    except (rawpy.LibRawError, OSError) as exc:
        raise MediaError(
            MediaHalt.UNDECODABLE,
            f"{src.name} ({fmt}) cannot be decoded (damaged or truncated): {exc}",
        ) from exc


def _libraw() -> str:
    return ".".join(str(part) for part in rawpy.libraw_version)


def raw_size(raw: Any) -> tuple[int, int]:
    """The upright ``(width, height)`` of LibRaw's full-size output of an opened file."""
    sizes = raw.sizes
    width, height = int(sizes.width), int(sizes.height)
    return (height, width) if int(sizes.flip) in _QUARTER_TURNS else (width, height)


def probe_raw(src: Path, fmt: str, *, max_pixels: int) -> ImageInfo:
    """What a RAW file is, from LibRaw's header read (no pixels decoded) and its EXIF.

    Args:
        src: the file.
        fmt: its format by name (``DNG``, ``Nikon NEF``, ...), from ``raw_format``.
        max_pixels: largest accepted ``width * height``.

    Returns:
        Upright size, :data:`RAW_MIME` type, one page, no alpha, capture time and zone.

    Raises:
        MediaError: as :func:`_open`, and ``too_many_pixels``.
    """
    with _open(src, fmt) as raw:
        width, height = raw_size(raw)
        stamp = raw.other.timestamp
    if width * height > max_pixels:
        raise too_many_pixels(width, height, max_pixels)
    captured_at, offset = _capture_time(src, stamp)
    return ImageInfo(
        width=width,
        height=height,
        mime_type=RAW_MIME.get(fmt, "application/octet-stream"),
        pages=1,
        has_alpha=False,
        captured_at=captured_at,
        captured_offset=offset,
    )


def decode_raw(src: Path, fmt: str, largest: int, max_pixels: int) -> pyvips.Image:
    """Demosaic ``src`` once: upright 8-bit sRGB, in memory, its longest edge ``largest`` or
    the photo's own where that is smaller (never upscaled).

    Raises:
        MediaError: as :func:`probe_raw`; ``undecodable`` when the sensor data is damaged.
    """
    with _open(src, fmt) as raw:
        width, height = raw_size(raw)
        if width * height > max_pixels:
            raise too_many_pixels(width, height, max_pixels)
        target = min(largest, max(width, height))
        try:
            rgb = raw.postprocess(
                use_camera_wb=True,
                output_color=rawpy.ColorSpace.sRGB,
                output_bps=8,
                half_size=max(width, height) // 2 >= target,
            )
        except rawpy.LibRawError as exc:
            raise MediaError(
                MediaHalt.UNDECODABLE,
                f"{src.name} ({fmt}) cannot be decoded (damaged or truncated): {exc}",
            ) from exc
    pixels = np.ascontiguousarray(rgb, dtype=np.uint8)
    image = pyvips.Image.new_from_array(pixels).copy(interpretation="srgb")
    if max(image.width, image.height) > target:
        image = image.thumbnail_image(target, height=target, size="down", no_rotate=True)
    return image.copy_memory()


# libvips field name -> where ExifRead files the tag: the Exif IFD, or IFD0 (TIFF/EP and DNG
# allow the capture tags there).
_EXIFREAD_KEYS: Final = {
    "exif-ifd0-DateTime": ("Image DateTime",),
    "exif-ifd3-GPSDateStamp": ("GPS GPSDate",),
    "exif-ifd3-GPSTimeStamp": ("GPS GPSTimeStamp",),
}


def _capture_time(src: Path, libraw_stamp: object) -> tuple[datetime | None, int | None]:
    try:
        with src.open("rb") as f:
            tags = exifread.process_file(f, details=False, extract_thumbnail=False)
    except Exception:  # ExifRead raises anything on odd files; the capture time is optional
        tags = {}

    def get(name: str) -> object:
        tag = name.rsplit("-", 1)[1]
        for key in _EXIFREAD_KEYS.get(name, (f"EXIF {tag}", f"Image {tag}")):
            if key in tags:
                values = tags[key].values
                if isinstance(values, str):
                    return values
                return " ".join(str(v) for v in values)  # GPS time: "14 27 181/25"
        return None

    captured_at, offset = capture_time_of(get)
    if captured_at is None and isinstance(libraw_stamp, datetime) and libraw_stamp.year > 1970:
        # LibRaw turns the camera's local stamp into an instant with this process's zone
        # (mktime) and rawpy back into this zone's local time: the camera's stamp again, its
        # zone unknown (taken as UTC, like any photo's).
        captured_at = libraw_stamp.replace(tzinfo=UTC)
    return captured_at, offset
