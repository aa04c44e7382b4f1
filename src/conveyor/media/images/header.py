"""A photo's header: what it is, how big, when it was taken, read without decoding pixels.

:func:`probe_image` (intake) and :func:`open_header` (the variants step, before its one decode)
read the header lazily: libvips sniffs the content (the name is ignored), nothing is allocated,
and a declared size over the pixel limit is refused before any decode (a bomb costs nothing).
Truncation is invisible here; the decode sees it.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyvips

from conveyor.errors import MediaError
from conveyor.media.halts import MediaHalt
from conveyor.media.images.isobmff import heif_brand, sequence_frames

__all__ = [
    "FAIL_ON",
    "Header",
    "ImageInfo",
    "field",
    "open_header",
    "probe_image",
    "too_many_pixels",
    "undecodable",
]

# Loaders we accept, by content sniffing. Others libvips may have (svg, pdf, csv, matrix, vips,
# raw) are not photos and widen the attack surface.
_LOADER_MIME = {
    "jpegload": "image/jpeg",
    "pngload": "image/png",
    "gifload": "image/gif",
    "webpload": "image/webp",
    "tiffload": "image/tiff",
    "jxlload": "image/jxl",
    "heifload": "image/heif",
}
_HEIF_MIME = {"av1": "image/avif", "hevc": "image/heic"}

FAIL_ON = "error"
"""libvips ``fail_on`` for every load: truncated or corrupt data is refused (``undecodable``)."""


@dataclass(frozen=True)
class ImageInfo:
    """What the header of a photo says.

    Attributes:
        width: upright width in pixels (after EXIF orientation / HEIF irot-imir).
        height: upright height in pixels.
        mime_type: from the loader libvips chose by content, e.g. ``image/jpeg``, ``image/heic``.
        pages: frames of an animation or sequence (1 for a still).
        has_alpha: the decoded image carries an alpha band.
        captured_at: EXIF DateTimeOriginal (else DateTime) in UTC; naive stamps are taken as UTC.
    """

    width: int
    height: int
    mime_type: str
    pages: int
    has_alpha: bool
    captured_at: datetime | None


@dataclass(frozen=True)
class Header:
    """An opened, checked header (:func:`open_header`).

    Attributes:
        image: the lazily loaded libvips image (no pixels decoded).
        loader: libvips loader without its ``_source``/``_buffer`` suffix, e.g. ``heifload``.
        width: upright width in pixels.
        height: upright height in pixels.
    """

    image: pyvips.Image
    loader: str
    width: int
    height: int


def probe_image(src: Path, *, max_pixels: int) -> ImageInfo:
    """Read a photo's header without decoding its pixels.

    Args:
        src: the file; its name and extension are ignored (content is sniffed).
        max_pixels: largest accepted ``width * height`` of one frame.

    Returns:
        The upright dimensions, content MIME type, frame count, alpha and capture time.

    Raises:
        MediaError: ``unsupported_media`` (empty, not an image, or an image kind we do not
            process), ``undecodable`` (a damaged header), ``too_many_pixels`` (declared size over
            ``max_pixels``).
    """
    head = open_header(src, max_pixels)
    image = head.image
    return ImageInfo(
        width=head.width,
        height=head.height,
        mime_type=_mime_type(image, head.loader),
        pages=sequence_frames(src)
        if head.loader == "heifload"
        else _int_field(image, "n-pages", 1),
        has_alpha=bool(image.hasalpha()),
        captured_at=_captured_at(image),
    )


def open_header(src: Path, max_pixels: int) -> Header:
    """Open ``src`` lazily and check it is a photo format within ``max_pixels``.

    Raises:
        MediaError: as :func:`probe_image`.
    """
    try:
        size = src.stat().st_size
    except OSError as exc:
        raise MediaError(
            MediaHalt.UNSUPPORTED_MEDIA, f"cannot read {src.name}: {exc.strerror}"
        ) from exc
    if size == 0:
        raise MediaError(MediaHalt.UNSUPPORTED_MEDIA, f"{src.name} is empty")
    declared = _gif_declared_size(src)
    if declared is not None and declared[0] * declared[1] > max_pixels:
        # libvips clips GIF frames to the logical screen; Pillow and browsers do not, so a frame
        # placed far outside it is a bomb for them and is refused here from the header.
        raise too_many_pixels(declared[0], declared[1], max_pixels)
    image = _load_lazily(src)
    loader = str(image.get("vips-loader")).removesuffix("_source").removesuffix("_buffer")
    if loader not in _LOADER_MIME:
        raise MediaError(
            MediaHalt.UNSUPPORTED_MEDIA, f"{src.name} is not a photo format we process"
        )
    width, height = int(image.width), int(image.height)
    if width * height > max_pixels:
        raise too_many_pixels(width, height, max_pixels)
    # libheif applies irot/imir itself; for other loaders the EXIF orientation 5-8 swaps edges.
    if loader != "heifload" and _int_field(image, "orientation", 1) in (5, 6, 7, 8):
        width, height = height, width
    return Header(image, loader, width, height)


def _load_lazily(src: Path) -> pyvips.Image:
    try:
        return pyvips.Image.new_from_file(str(src), access="sequential", fail_on=FAIL_ON)
    except pyvips.Error as exc:
        if heif_brand(src):
            # libvips's sniffer does not know every HEIF brand (e.g. "avis" image sequences).
            try:
                return pyvips.Image.heifload(str(src), access="sequential", fail_on=FAIL_ON)
            except pyvips.Error as heif_exc:
                raise undecodable(src, heif_exc) from heif_exc
        if "not a known file format" in str(exc):
            raise MediaError(MediaHalt.UNSUPPORTED_MEDIA, f"{src.name} is not an image") from exc
        raise undecodable(src, exc) from exc


def too_many_pixels(width: int, height: int, max_pixels: int) -> MediaError:
    """The ``too_many_pixels`` refusal of a ``width``×``height`` image."""
    return MediaError(
        MediaHalt.TOO_MANY_PIXELS,
        f"the image declares {width}×{height} = {width * height:,} pixels, "
        f"more than the limit of {max_pixels:,}",
    )


def undecodable(src: Path, exc: pyvips.Error) -> MediaError:
    """The ``undecodable`` refusal of ``src``, quoting the last line of libvips's error."""
    detail = (getattr(exc, "detail", "") or str(exc)).strip().splitlines()
    last = detail[-1].strip() if detail else ""
    return MediaError(
        MediaHalt.UNDECODABLE, f"{src.name} cannot be decoded (damaged or truncated): {last}"
    )


def _gif_declared_size(src: Path) -> tuple[int, int] | None:
    """Logical screen of a GIF grown to the first frame's extent (as Pillow sizes it)."""
    with src.open("rb") as f:
        data = f.read(1 << 16)
    if len(data) < 13 or data[:6] not in (b"GIF87a", b"GIF89a"):
        return None
    width, height, flags = struct.unpack_from("<HHB", data, 6)
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while pos < len(data):
        block = data[pos]
        if block == 0x21:  # extension: label, then sub-blocks
            pos += 2
            while pos < len(data) and data[pos]:
                pos += data[pos] + 1
            pos += 1
        elif block == 0x2C and pos + 9 <= len(data):  # image descriptor
            left, top, w, h = struct.unpack_from("<HHHH", data, pos + 1)
            return max(width, left + w), max(height, top + h)
        else:
            break
    return width, height


def _mime_type(image: pyvips.Image, loader: str) -> str:
    if loader == "heifload":
        compression = str(field(image, "heif-compression") or "")
        return _HEIF_MIME.get(compression, "image/heif")
    return _LOADER_MIME[loader]


def field(image: pyvips.Image, name: str) -> Any:
    """The header field ``name`` of ``image``, None when absent."""
    return image.get(name) if image.get_typeof(name) != 0 else None


def _int_field(image: pyvips.Image, name: str, default: int) -> int:
    value = field(image, name)
    return int(value) if isinstance(value, int) else default


def _captured_at(image: pyvips.Image) -> datetime | None:
    # libvips renders EXIF strings as "2008:05:30 15:56:01 (2008:05:30 15:56:01, ASCII, ...)".
    for stamp_field, offset_field in (
        ("exif-ifd2-DateTimeOriginal", "exif-ifd2-OffsetTimeOriginal"),
        ("exif-ifd0-DateTime", "exif-ifd2-OffsetTime"),
    ):
        raw = field(image, stamp_field)
        if not isinstance(raw, str):
            continue
        try:
            stamp = datetime.strptime(raw[:19], "%Y:%m:%d %H:%M:%S")
        except ValueError:
            continue  # "0000:00:00 00:00:00" and other placeholders
        return stamp.replace(tzinfo=_exif_offset(field(image, offset_field))).astimezone(UTC)
    return None


def _exif_offset(raw: object) -> timezone:
    if isinstance(raw, str) and len(raw) >= 6 and raw[0] in "+-" and raw[3] == ":":
        with contextlib.suppress(ValueError):
            minutes = int(raw[1:3]) * 60 + int(raw[4:6])
            return timezone(timedelta(minutes=-minutes if raw[0] == "-" else minutes))
    return UTC
