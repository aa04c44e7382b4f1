"""A photo's header: what it is, how big, when it was taken, read without decoding pixels.

:func:`probe_image` (intake) and :func:`open_header` (the variants step, before its one decode)
read the header lazily: libvips sniffs the content (the name is ignored), nothing is allocated,
and a declared size over the pixel limit is refused before any decode (a bomb costs nothing).
Truncation is invisible here; the decode sees it.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import pyvips

from conveyor.errors import MediaError
from conveyor.media.halts import MediaHalt
from conveyor.media.images.isobmff import heif_brand, sequence_frames

__all__ = [
    "FAIL_ON",
    "Header",
    "ImageInfo",
    "capture_time_of",
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
        captured_at: the instant of capture in UTC (see :func:`capture_time`); a local time
            whose zone is unknown is taken as UTC.
        captured_offset: the zone the photo was taken in, minutes east of UTC; None unknown.
    """

    width: int
    height: int
    mime_type: str
    pages: int
    has_alpha: bool
    captured_at: datetime | None
    captured_offset: int | None = None


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
    captured_at, captured_offset = capture_time(image)
    return ImageInfo(
        width=head.width,
        height=head.height,
        mime_type=_mime_type(image, head.loader),
        pages=sequence_frames(src)
        if head.loader == "heifload"
        else _int_field(image, "n-pages", 1),
        has_alpha=bool(image.hasalpha()),
        captured_at=captured_at,
        captured_offset=captured_offset,
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


# Each local capture stamp with the zone tags that may go with it, best first (EXIF 2.31:
# OffsetTimeOriginal belongs to DateTimeOriginal, but editors often write only OffsetTime).
_STAMPS: Final = (
    (
        "exif-ifd2-DateTimeOriginal",
        ("exif-ifd2-OffsetTimeOriginal", "exif-ifd2-OffsetTime", "exif-ifd2-OffsetTimeDigitized"),
    ),
    ("exif-ifd2-DateTimeDigitized", ("exif-ifd2-OffsetTimeDigitized", "exif-ifd2-OffsetTime")),
    ("exif-ifd0-DateTime", ("exif-ifd2-OffsetTime",)),
)
# Zones run from UTC-12:00 to UTC+14:00, in quarter hours.
_ZONE_RANGE: Final = range(-12 * 60, 14 * 60 + 1)


def capture_time(image: pyvips.Image) -> tuple[datetime | None, int | None]:
    """When and in which zone a photo was taken, from the EXIF libvips read
    (:func:`capture_time_of`)."""
    return capture_time_of(lambda name: field(image, name))


def capture_time_of(get: Callable[[str], object]) -> tuple[datetime | None, int | None]:
    """When and in which zone a photo was taken, from its EXIF: (UTC instant, minutes east).

    ``get`` gives a tag by its libvips field name (``exif-ifd2-DateTimeOriginal``), rendered as
    libvips renders it (a stamp ``2008:05:30 15:56:01 ...``, GPS time ``14/1 27/1 724/100``),
    or None: libvips's own fields, or another EXIF reader's (a camera RAW file's).

    The local stamp is ``DateTimeOriginal`` (else ``DateTimeDigitized``, else ``DateTime``);
    its zone is the first of the offset tags that go with it. Without one, the GPS date and
    time (UTC by definition) give the zone as the stamp's distance from them, rounded to a
    quarter hour, when that is a zone at all (a stale GPS fix a day old is not). Without a
    zone the local time is taken as UTC, and the zone is None. A photo with GPS time and no
    local stamp has the GPS instant, zone unknown.
    """
    gps = _gps_instant(get)
    for stamp_field, offset_fields in _STAMPS:
        local = _exif_stamp(get(stamp_field))
        if local is None:
            continue
        offset = next((o for f in offset_fields if (o := _exif_offset(get(f))) is not None), None)
        if offset is None and gps is not None:
            distance = (local - gps.replace(tzinfo=None)).total_seconds() / 60
            quarter = round(distance / 15) * 15
            if quarter in _ZONE_RANGE and abs(distance - quarter) <= 2:
                offset = quarter
        if offset is None:
            return local.replace(tzinfo=UTC), None
        return (local - timedelta(minutes=offset)).replace(tzinfo=UTC), offset
    return gps, None


def _exif_stamp(raw: object) -> datetime | None:
    # libvips renders EXIF strings as "2008:05:30 15:56:01 (2008:05:30 15:56:01, ASCII, ...)".
    if not isinstance(raw, str):
        return None
    try:
        return datetime.strptime(raw[:19], "%Y:%m:%d %H:%M:%S")
    except ValueError:
        return None  # "0000:00:00 00:00:00" and other placeholders


def _gps_instant(get: Callable[[str], object]) -> datetime | None:
    """GPSDateStamp + GPSTimeStamp (UTC); libvips renders the time as "14/1 27/1 724/100 (...)"."""
    date, time = get("exif-ifd3-GPSDateStamp"), get("exif-ifd3-GPSTimeStamp")
    if not isinstance(date, str) or not isinstance(time, str):
        return None
    try:
        day = datetime.strptime(date[:10], "%Y:%m:%d")
        parts = [Fraction(p) for p in time.split("(")[0].split()[:3]]
        hours, minutes, seconds = (float(p) for p in parts)
    except (ValueError, ZeroDivisionError):
        return None
    if len(parts) != 3 or not (0 <= hours < 24 and 0 <= minutes < 60 and 0 <= seconds < 61):
        return None
    return (day + timedelta(hours=hours, minutes=minutes, seconds=int(seconds))).replace(tzinfo=UTC)


def _exif_offset(raw: object) -> int | None:
    """Minutes east of UTC of an EXIF offset tag ("+02:00", "-05:30"); None when absent."""
    if isinstance(raw, str) and len(raw) >= 6 and raw[0] in "+-" and raw[3] == ":":
        with contextlib.suppress(ValueError):
            minutes = int(raw[1:3]) * 60 + int(raw[4:6])
            offset = -minutes if raw[0] == "-" else minutes
            return offset if offset in _ZONE_RANGE else None
    return None
