"""Web variants of a photo (``thumb``, ``medium``, ``preview``) from one decode (NORMS M1).

One decode per photo: the header is read first (lazily, nothing allocated) to refuse bombs, then
the pixels are decoded once with shrink-on-load to the largest role, brought upright and to 8-bit
sRGB (:mod:`~conveyor.media.images.colour`), held in memory, and every smaller role is resized
from that image.

Decisions (they answer a user's expectation, not a library default):

* **Truncated or corrupt data is refused** (``MediaHalt.UNDECODABLE``): the loaders run with
  ``fail_on="error"``. A half-grey thumbnail looks like a bug of ours and hides that the upload is
  damaged (usually an interrupted transfer); a refusal says so and the original stays available.
* **Greyscale becomes sRGB**: every variant is 3 bands (4 with alpha) 8-bit sRGB, one shape for
  every consumer. WebP and AVIF store YUV anyway, so the cost is nil.
* **HDR** (AVIF/HEIF whose ``nclx`` colour box says PQ or HLG, and no ICC profile) is tone mapped
  to SDR (:func:`~conveyor.media.images.colour.hdr_to_srgb`).
* **HEIC** goes through :mod:`~conveyor.media.images.hevc` when libvips has no HEVC decoder.
* **Camera RAW** goes through LibRaw (:mod:`~conveyor.media.images.raw`), never libvips.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyvips

from conveyor.errors import MediaError
from conveyor.files import write_atomic
from conveyor.media.halts import MediaHalt
from conveyor.media.images import av1, hevc
from conveyor.media.images.colour import (
    PRIMARIES_TO_BT709,
    has_icc,
    is_hdr,
    shrink_heif,
    to_bt709_primaries,
    to_srgb8,
)
from conveyor.media.images.header import FAIL_ON, Header, field, open_header, undecodable
from conveyor.media.images.isobmff import heif_nclx, primary_item
from conveyor.media.images.raw import decode_raw
from conveyor.objects.sniff import SNIFF_BYTES, raw_format

__all__ = ["ImageVariant", "make_image_variants"]


@dataclass(frozen=True)
class ImageVariant:
    """One written variant file.

    Attributes:
        role: ``thumb``, ``medium`` or ``preview`` (the keys of ``sizes``).
        path: ``<out_dir>/<role>.<ext>``.
        mime_type: ``image/webp``, ``image/jpeg`` or ``image/avif``.
        width: pixels.
        height: pixels.
        size: bytes of the file.
    """

    role: str
    path: Path
    mime_type: str
    width: int
    height: int
    size: int


_FORMATS = {
    "webp": ("image/webp", ".webp"),
    "jpeg": ("image/jpeg", ".jpg"),
    "avif": ("image/avif", ".avif"),
}


def make_image_variants(
    src: Path,
    out_dir: Path,
    *,
    sizes: Mapping[str, int],
    image_format: str,
    quality: int,
    max_pixels: int,
) -> list[ImageVariant]:
    """Write one upright 8-bit sRGB variant per role, metadata stripped (NORMS M1).

    Each role's longest edge is ``min(sizes[role], original longest edge)``: never upscaled. An
    animation gives its first frame. Alpha is kept in WebP/AVIF and flattened on white in JPEG.
    Each file is written to a temporary name in ``out_dir`` and renamed to ``<role>.<ext>``.

    Args:
        src: the photo.
        out_dir: folder for the variants; created if missing.
        sizes: role → longest edge in pixels, e.g. ``{"thumb": 320, "medium": 1280}``.
        image_format: ``webp``, ``jpeg`` or ``avif``.
        quality: encoder quality 1-100.
        max_pixels: largest accepted ``width * height``, checked from the header.

    Returns:
        The variants in the order of ``sizes``.

    Raises:
        MediaError: as :func:`probe_image`, plus ``undecodable`` when the pixel data is damaged
            or truncated and ``unsupported_media`` when no decoder for the codec is installed.
        ValueError: an unknown ``image_format`` or a size below 1.
    """
    if image_format not in _FORMATS:
        raise ValueError(f"image_format must be one of {sorted(_FORMATS)}, not {image_format!r}")
    if any(size < 1 for size in sizes.values()):
        raise ValueError(f"every size must be at least 1 pixel: {dict(sizes)}")
    if not sizes:
        return []
    with src.open("rb") as f:
        raw = raw_format(f.read(SNIFF_BYTES))
    if raw is not None:
        # Never through libvips: as a TIFF or ISO media file it is its small embedded preview.
        base = decode_raw(src, raw, max(sizes.values()), max_pixels)
        longest = max(base.width, base.height)  # never shrunk below the largest role
    else:
        head = open_header(src, max_pixels)
        longest = max(head.width, head.height)
        target = min(max(sizes.values()), longest)
        base = _decode(src, head, target, max_pixels)

    mime_type, ext = _FORMATS[image_format]
    if image_format == "jpeg" and base.hasalpha():
        base = base.flatten(background=[255, 255, 255]).cast("uchar")
    out_dir.mkdir(parents=True, exist_ok=True)
    variants = []
    encoded: dict[int, tuple[bytes, int, int]] = {}  # edge → file; a small original fills roles
    for role, size in sizes.items():
        edge = min(size, longest)
        if edge not in encoded:
            image = base
            if max(base.width, base.height) > edge:
                # thumbnail_image premultiplies alpha and rounds the short edge like the first pass.
                image = base.thumbnail_image(edge, height=edge, size="down", no_rotate=True)
            encoded[edge] = (_encode(image, image_format, quality), image.width, image.height)
        data, width, height = encoded[edge]
        path = out_dir / f"{role}{ext}"
        write_atomic(path, data)
        variants.append(ImageVariant(role, path, mime_type, width, height, len(data)))
    return variants


def _decode(src: Path, head: Header, target: int, max_pixels: int) -> pyvips.Image:
    """Decode once, upright, 8-bit sRGB, longest edge ``target``, rendered into memory."""
    nclx = heif_nclx(src) if head.loader == "heifload" and not has_icc(head.image) else None
    # An embedded profile is converted to sRGB; without one (sRGB assumed, CMYK gets libvips's
    # fallback profile) asking for sRGB output would cost an identity ICC transform (30× slower).
    to_srgb = {"output_profile": "srgb"} if has_icc(head.image) else {}
    try:
        if head.loader == "heifload" and nclx is not None and is_hdr(nclx):
            item = primary_item(src)
            if item is not None and av1.takes_fast_path(item):
                fast = av1.decode_av1_hdr(src, item, target)
                if fast is not None:
                    return to_srgb8(fast).copy_memory()
        if head.loader == "heifload":
            # HEIF has no shrink-on-load; loading explicitly also covers brands that libvips's
            # sniffer misses (thumbnail() re-sniffs the file).
            image = pyvips.Image.heifload(str(src), access="sequential", fail_on=FAIL_ON)
            image = shrink_heif(image, target, nclx, to_srgb)
        else:
            image = pyvips.Image.thumbnail(
                str(src),
                target,
                height=target,
                size="down",
                fail_on=FAIL_ON,
                **to_srgb,
            )
            if nclx is not None and nclx.primaries in PRIMARIES_TO_BT709:
                image = to_bt709_primaries(image, nclx.primaries)
        image = to_srgb8(image)
        return image.copy_memory()
    except pyvips.Error as exc:
        text = str(exc)
        if "has not been built in" not in text and "No decoding plugin" not in text:
            raise undecodable(src, exc) from exc
        if field(head.image, "heif-compression") != "hevc":
            raise MediaError(
                MediaHalt.UNSUPPORTED_MEDIA,
                f"{src.name}: this libvips build has no decoder for this codec",
            ) from exc
    return hevc.decode_hevc(src, target, nclx, max_pixels)


def _encode(image: pyvips.Image, image_format: str, quality: int) -> bytes:
    # keep="none" drops EXIF, XMP, IPTC and ICC (the pixels are sRGB, the web default).
    if image_format == "webp":
        data = image.webpsave_buffer(Q=quality, keep="none")
    elif image_format == "jpeg":
        data = image.jpegsave_buffer(Q=quality, keep="none", optimize_coding=True)
    else:
        data = image.heifsave_buffer(Q=quality, keep="none", compression="av1")
    return bytes(data)
