"""Photo probing and web variants (``thumb``, ``medium``, ``preview``) with libvips (NORMS M1, M2).

One decode per photo: the header is read first (lazily, nothing allocated) to refuse bombs, then the
pixels are decoded once with shrink-on-load to the largest role, brought upright and to 8-bit sRGB,
held in memory, and every smaller role is resized from that image.

Decisions (they answer a user's expectation, not a library default):

* **Truncated or corrupt data is refused** (``MediaError("undecodable")``): the loaders run with
  ``fail_on="error"``. A half-grey thumbnail looks like a bug of ours and hides that the upload is
  damaged (usually an interrupted transfer); a refusal says so and the original stays available.
  :func:`probe_image` reads the header only, so it cannot see truncation; the variant step does.
* **Greyscale becomes sRGB**: every variant is 3 bands (4 with alpha) 8-bit sRGB, one shape for
  every consumer. WebP and AVIF store YUV anyway, so the cost is nil.
* **HDR** (AVIF/HEIF whose ``nclx`` colour box says PQ or HLG, and no ICC profile): libvips 8.18 has
  no PQ/HLG operation (only UltraHDR gain maps), so the transfer is decoded here: PQ/HLG → linear
  light with BT.2408 reference white (203 cd/m²) at 1.0, primaries (P3, BT.2020) → BT.709 by matrix,
  values above a knee rolled off with an exponential shoulder, then the sRGB curve. An SDR ``nclx``
  with wide primaries gets the matrix only.
* **HEIC needs an HEVC decoder** that the pyvips-binary wheel does not ship. The header (hence
  :func:`probe_image`) comes from libvips as for every format; when libvips then reports that it has
  no HEVC decoder, the pixels are decoded (once) by pillow-heif instead, whose libheif bundles
  libde265, wrapped as a libvips image with the file's ICC profile, and go through the same shrink
  and colour steps. libheif applies the ``irot``/``imir`` transforms, so the EXIF orientation tag
  (an iPhone writes both) is ignored, as libvips does for HEIF. pillow-heif decodes a truncated
  grid with the missing tiles filled in, so the item extents are checked against the file size
  first. AVIF (AV1) never takes this path: libvips decodes it itself.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pillow_heif
import pyvips

from conveyor.errors import MediaError

__all__ = ["ImageInfo", "ImageVariant", "make_image_variants", "probe_image"]


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
_HEIF_BRANDS = {b"avif", b"avis", b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1"}
_FORMATS = {
    "webp": ("image/webp", ".webp"),
    "jpeg": ("image/jpeg", ".jpg"),
    "avif": ("image/avif", ".avif"),
}
_FAIL_ON = "error"  # see the module docstring: truncated/corrupt input is refused

# nclx code points (ITU-T H.273).
_TRANSFER_PQ = 16
_TRANSFER_HLG = 18
_PRIMARIES_TO_BT709: dict[int, list[list[float]]] = {
    # Linear-light RGB → BT.709/sRGB RGB, both D65.
    9: [  # BT.2020
        [1.6605, -0.5876, -0.0728],
        [-0.1246, 1.1329, -0.0083],
        [-0.0182, -0.1006, 1.1187],
    ],
    12: [  # SMPTE EG 432-1 (Display P3)
        [1.2249, -0.2247, 0.0],
        [-0.0420, 1.0419, 0.0],
        [-0.0197, -0.0786, 1.0979],
    ],
}
_REFERENCE_WHITE_NITS = 203.0  # BT.2408 HDR reference white; maps to SDR 1.0
_KNEE = 0.75  # below this (linear, 1.0 = reference white) HDR values pass unchanged


@dataclass(frozen=True)
class _Nclx:
    primaries: int
    transfer: int


@dataclass(frozen=True)
class _Header:
    image: pyvips.Image
    loader: str
    width: int  # upright
    height: int  # upright


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
    head = _open_header(src, max_pixels)
    image = head.image
    return ImageInfo(
        width=head.width,
        height=head.height,
        mime_type=_mime_type(image, head.loader),
        pages=_sequence_frames(src)
        if head.loader == "heifload"
        else _int_field(image, "n-pages", 1),
        has_alpha=bool(image.hasalpha()),
        captured_at=_captured_at(image),
    )


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
    head = _open_header(src, max_pixels)
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
        _write_atomic(path, data)
        variants.append(ImageVariant(role, path, mime_type, width, height, len(data)))
    return variants


# --- header -----------------------------------------------------------------------------------


def _open_header(src: Path, max_pixels: int) -> _Header:
    try:
        size = src.stat().st_size
    except OSError as exc:
        raise MediaError("unsupported_media", f"cannot read {src.name}: {exc.strerror}") from exc
    if size == 0:
        raise MediaError("unsupported_media", f"{src.name} is empty")
    declared = _gif_declared_size(src)
    if declared is not None and declared[0] * declared[1] > max_pixels:
        # libvips clips GIF frames to the logical screen; Pillow and browsers do not, so a frame
        # placed far outside it is a bomb for them and is refused here from the header.
        raise _too_many(declared[0], declared[1], max_pixels)
    image = _load_lazily(src)
    loader = str(image.get("vips-loader")).removesuffix("_source").removesuffix("_buffer")
    if loader not in _LOADER_MIME:
        raise MediaError("unsupported_media", f"{src.name} is not a photo format we process")
    width, height = int(image.width), int(image.height)
    if width * height > max_pixels:
        raise _too_many(width, height, max_pixels)
    # libheif applies irot/imir itself; for other loaders the EXIF orientation 5-8 swaps edges.
    if loader != "heifload" and _int_field(image, "orientation", 1) in (5, 6, 7, 8):
        width, height = height, width
    return _Header(image, loader, width, height)


def _load_lazily(src: Path) -> pyvips.Image:
    try:
        return pyvips.Image.new_from_file(str(src), access="sequential", fail_on=_FAIL_ON)
    except pyvips.Error as exc:
        if _heif_brand(src):
            # libvips's sniffer does not know every HEIF brand (e.g. "avis" image sequences).
            try:
                return pyvips.Image.heifload(str(src), access="sequential", fail_on=_FAIL_ON)
            except pyvips.Error as heif_exc:
                raise _undecodable(src, heif_exc) from heif_exc
        if "not a known file format" in str(exc):
            raise MediaError("unsupported_media", f"{src.name} is not an image") from exc
        raise _undecodable(src, exc) from exc


def _too_many(width: int, height: int, max_pixels: int) -> MediaError:
    return MediaError(
        "too_many_pixels",
        f"the image declares {width}×{height} = {width * height:,} pixels, "
        f"more than the limit of {max_pixels:,}",
    )


def _undecodable(src: Path, exc: pyvips.Error) -> MediaError:
    detail = (getattr(exc, "detail", "") or str(exc)).strip().splitlines()
    last = detail[-1].strip() if detail else ""
    return MediaError("undecodable", f"{src.name} cannot be decoded (damaged or truncated): {last}")


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


def _heif_brand(src: Path) -> bool:
    with src.open("rb") as f:
        head = f.read(64)
    if len(head) < 16 or head[4:8] != b"ftyp":
        return False
    (box_size,) = struct.unpack_from(">I", head, 0)
    brands = [head[8:12]] + [head[i : i + 4] for i in range(16, min(box_size, len(head)) - 3, 4)]
    return any(brand in _HEIF_BRANDS for brand in brands)


def _mime_type(image: pyvips.Image, loader: str) -> str:
    if loader == "heifload":
        compression = str(_field(image, "heif-compression") or "")
        return _HEIF_MIME.get(compression, "image/heif")
    return _LOADER_MIME[loader]


def _field(image: pyvips.Image, name: str) -> Any:
    return image.get(name) if image.get_typeof(name) != 0 else None


def _int_field(image: pyvips.Image, name: str, default: int) -> int:
    value = _field(image, name)
    return int(value) if isinstance(value, int) else default


def _captured_at(image: pyvips.Image) -> datetime | None:
    # libvips renders EXIF strings as "2008:05:30 15:56:01 (2008:05:30 15:56:01, ASCII, ...)".
    for stamp_field, offset_field in (
        ("exif-ifd2-DateTimeOriginal", "exif-ifd2-OffsetTimeOriginal"),
        ("exif-ifd0-DateTime", "exif-ifd2-OffsetTime"),
    ):
        raw = _field(image, stamp_field)
        if not isinstance(raw, str):
            continue
        try:
            stamp = datetime.strptime(raw[:19], "%Y:%m:%d %H:%M:%S")
        except ValueError:
            continue  # "0000:00:00 00:00:00" and other placeholders
        return stamp.replace(tzinfo=_exif_offset(_field(image, offset_field))).astimezone(UTC)
    return None


def _exif_offset(raw: object) -> timezone:
    if isinstance(raw, str) and len(raw) >= 6 and raw[0] in "+-" and raw[3] == ":":
        with contextlib.suppress(ValueError):
            minutes = int(raw[1:3]) * 60 + int(raw[4:6])
            return timezone(timedelta(minutes=-minutes if raw[0] == "-" else minutes))
    return UTC


# --- decode -----------------------------------------------------------------------------------


def _decode(src: Path, head: _Header, target: int, max_pixels: int) -> pyvips.Image:
    """Decode once, upright, 8-bit sRGB, longest edge ``target``, rendered into memory."""
    nclx = _heif_nclx(src) if head.loader == "heifload" and not _has_icc(head.image) else None
    # An embedded profile is converted to sRGB; without one (sRGB assumed, CMYK gets libvips's
    # fallback profile) asking for sRGB output would cost an identity ICC transform (30× slower).
    to_srgb = {"output_profile": "srgb"} if _has_icc(head.image) else {}
    try:
        if head.loader == "heifload":
            # HEIF has no shrink-on-load; loading explicitly also covers brands that libvips's
            # sniffer misses (thumbnail() re-sniffs the file).
            image = pyvips.Image.heifload(str(src), access="sequential", fail_on=_FAIL_ON)
            image = _shrink_heif(image, target, nclx, to_srgb)
        else:
            image = pyvips.Image.thumbnail(
                str(src),
                target,
                height=target,
                size="down",
                fail_on=_FAIL_ON,
                **to_srgb,
            )
            if nclx is not None and nclx.primaries in _PRIMARIES_TO_BT709:
                image = _to_bt709_primaries(image, nclx.primaries)
        image = _to_srgb8(image)
        return image.copy_memory()
    except pyvips.Error as exc:
        text = str(exc)
        if "has not been built in" not in text and "No decoding plugin" not in text:
            raise _undecodable(src, exc) from exc
        if _field(head.image, "heif-compression") != "hevc":
            raise MediaError(
                "unsupported_media", f"{src.name}: this libvips build has no decoder for this codec"
            ) from exc
    return _decode_hevc(src, target, nclx, max_pixels)


def _shrink_heif(
    image: pyvips.Image, target: int, nclx: _Nclx | None, to_srgb: Mapping[str, str]
) -> pyvips.Image:
    """A full-size HEIF/AVIF decode (libvips's or pillow-heif's) → longest edge ``target``."""
    if nclx is not None and nclx.transfer in _NONSRGB_TRANSFERS:
        # thumbnail_image() would squash the 16-bit PQ/HLG code values to 8 bits as if sRGB.
        scale = target / max(image.width, image.height)
        if scale < 1:
            image = (
                image.premultiply().resize(scale).unpremultiply().cast(image.format)
                if image.hasalpha()
                else image.resize(scale)
            )
        return _hdr_to_srgb(image, nclx)
    return image.thumbnail_image(target, height=target, size="down", **to_srgb)


# pillow-heif modes (with bgr_mode off and 10/12-bit scaled to 16) → libvips interpretation.
_HEIF_MODES = {
    "RGB": "srgb",
    "RGBA": "srgb",
    "RGBa": "srgb",
    "L": "b-w",
    "LA": "b-w",
    "La": "b-w",
    "RGB;16": "rgb16",
    "RGBA;16": "rgb16",
    "RGBa;16": "rgb16",
    "L;16": "grey16",
    "LA;16": "grey16",
    "La;16": "grey16",
    "I;16": "grey16",
    "I;16L": "grey16",
}
_PILLOW_HEIF_ERRORS = (ValueError, EOFError, SyntaxError, RuntimeError, OSError)


def _pillow_heif_error(src: Path, exc: Exception) -> MediaError:
    text = str(exc)
    if "has not been built in" in text or "No decoding plugin" in text:
        return MediaError("unsupported_media", f"{src.name}: no HEVC (HEIC) decoder is installed")
    return MediaError("undecodable", f"{src.name} cannot be decoded (damaged or truncated): {text}")


def _decode_hevc(src: Path, target: int, nclx: _Nclx | None, max_pixels: int) -> pyvips.Image:
    """HEIC through pillow-heif: one full decode, then :func:`_shrink_heif` as for libvips."""
    if not _heif_extents_in_file(src):
        raise MediaError(
            "undecodable", f"{src.name} cannot be decoded (damaged or truncated): data past its end"
        )
    hdr = nclx is not None and nclx.transfer in _NONSRGB_TRANSFERS
    try:
        # Lazy: the header is parsed here, the pixels are decoded when .data is read.
        heif = pillow_heif.open_heif(src, convert_hdr_to_8bit=not hdr)
        width, height = heif.size
        mode = str(heif.mode)
        icc = heif.info.get("icc_profile")
    except _PILLOW_HEIF_ERRORS as exc:
        raise _pillow_heif_error(src, exc) from exc
    if width * height > max_pixels:
        raise _too_many(width, height, max_pixels)
    if mode not in _HEIF_MODES:
        raise MediaError("unsupported_media", f"{src.name}: HEIF pixel mode {mode} not supported")
    try:
        data = heif.data  # decoded here, irot/imir already applied by libheif
        stride = heif.stride
    except _PILLOW_HEIF_ERRORS as exc:
        raise _pillow_heif_error(src, exc) from exc
    del heif
    bands = len(mode.split(";")[0].replace("I", "L"))
    fmt = "ushort" if mode.endswith((";16", ";16L")) else "uchar"
    if stride != width * bands * (2 if fmt == "ushort" else 1):  # remove_stride is the default
        raise MediaError("undecodable", f"{src.name}: unexpected row stride {stride}")
    try:
        image = pyvips.Image.new_from_memory(data, width, height, bands, fmt)  # no copy
        del data  # the image keeps the buffer alive until it is dropped below
        image = image.copy(interpretation=_HEIF_MODES[mode])
        if "a" in mode.split(";")[0]:  # premultiplied alpha
            image = image.unpremultiply().cast(fmt)
        if isinstance(icc, bytes) and icc:
            image.set_type(pyvips.GValue.blob_type, "icc-profile-data", icc)
        to_srgb = {"output_profile": "srgb"} if _has_icc(image) else {}
        image = _shrink_heif(image, target, None if to_srgb else nclx, to_srgb)
        return _to_srgb8(image).copy_memory()
    except pyvips.Error as exc:
        raise _undecodable(src, exc) from exc


_NONSRGB_TRANSFERS = (_TRANSFER_PQ, _TRANSFER_HLG)


def _has_icc(image: pyvips.Image) -> bool:
    return bool(image.get_typeof("icc-profile-data") != 0)


def _to_srgb8(image: pyvips.Image) -> pyvips.Image:
    """Any interpretation/depth (grey, grey16, rgb16, cmyk...) → sRGB uchar, alpha kept."""
    if image.interpretation != "srgb" or image.format != "uchar":
        image = image.colourspace("srgb")
    if image.format != "uchar":
        image = image.cast("uchar")
    # Nothing downstream may treat the pixels as anything but sRGB (the profile is stripped
    # on save anyway), so drop it here to keep thumbnail_image() from re-transforming.
    image = image.copy()
    if _has_icc(image):
        image.remove("icc-profile-data")
    return image


def _split_alpha(image: pyvips.Image) -> tuple[pyvips.Image, pyvips.Image | None]:
    if image.hasalpha():
        return image.extract_band(0, n=image.bands - 1), image.extract_band(image.bands - 1)
    return image, None


def _hdr_to_srgb(image: pyvips.Image, nclx: _Nclx) -> pyvips.Image:
    """PQ or HLG code values (16-bit) → tone-mapped 8-bit sRGB (see the module docstring)."""
    colour, alpha = _split_alpha(image)
    full = 65535.0 if colour.format == "ushort" else 255.0
    e = colour.cast("float") / full
    if nclx.transfer == _TRANSFER_PQ:
        m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875
        p = e ** (1 / m2)
        num = p - c1
        num = (num > 0).ifthenelse(num, 0.0)
        linear = (num / (c2 - c3 * p)) ** (1 / m1) * (10000.0 / _REFERENCE_WHITE_NITS)
    else:  # HLG: inverse OETF to scene light, then the 1000 cd/m² OOTF (gamma 1.2, per channel)
        a, b, c = 0.17883277, 0.28466892, 0.55991073
        low = e * e / 3.0
        high = (((e - c) / a).exp() + b) / 12.0
        scene = (e <= 0.5).ifthenelse(low, high)
        linear = scene**1.2 * (1000.0 / _REFERENCE_WHITE_NITS)
    if nclx.primaries in _PRIMARIES_TO_BT709:
        linear = linear.recomb(_PRIMARIES_TO_BT709[nclx.primaries])
        linear = (linear > 0).ifthenelse(linear, 0.0)
    # Exponential shoulder: identity below the knee, same slope at it, approaches 1.0.
    span = 1.0 - _KNEE
    shoulder = _KNEE + span * (1.0 - (-(linear - _KNEE) / span).exp())
    mapped = (linear > _KNEE).ifthenelse(shoulder, linear)
    out = mapped.copy(interpretation="scrgb").colourspace("srgb")
    if alpha is not None:
        out = out.bandjoin((alpha.cast("float") * (255.0 / full)).cast("uchar"))
    return out


def _to_bt709_primaries(image: pyvips.Image, primaries: int) -> pyvips.Image:
    """SDR sRGB-curve pixels in wide primaries (nclx, no ICC) → BT.709 primaries."""
    colour, alpha = _split_alpha(image.colourspace("srgb"))
    linear = colour.colourspace("scrgb").recomb(_PRIMARIES_TO_BT709[primaries])
    linear = (linear > 0).ifthenelse(linear, 0.0)
    out = linear.copy(interpretation="scrgb").colourspace("srgb")
    return out if alpha is None else out.bandjoin(alpha.cast(out.format))


# --- HEIF colour box ------------------------------------------------------------------------


def _heif_nclx(src: Path) -> _Nclx | None:
    """The ``nclx`` colour of the primary item of an ISOBMFF (HEIF/AVIF) file, if any.

    libvips does not expose it, and PQ/HLG pixels are wrong without it.
    """
    try:
        meta = _read_top_box(src, b"meta", limit=1 << 22)
    except OSError:
        return None
    if meta is None or len(meta) < 4:
        return None
    children = dict((t, (s, e)) for t, s, e in _boxes(meta, 4, len(meta)))
    if b"pitm" not in children or b"iprp" not in children:
        return None
    s, _ = children[b"pitm"]
    primary = struct.unpack_from(">H" if meta[s] == 0 else ">I", meta, s + 4)[0]
    s, e = children[b"iprp"]
    iprp = dict((t, (ps, pe)) for t, ps, pe in _boxes(meta, s, e))
    if b"ipco" not in iprp or b"ipma" not in iprp:
        return None
    properties = list(_boxes(meta, *iprp[b"ipco"]))
    for index in _item_properties(meta, *iprp[b"ipma"], item=primary):
        if 1 <= index <= len(properties):
            kind, ps, pe = properties[index - 1]
            if kind == b"colr" and pe - ps >= 10 and meta[ps : ps + 4] == b"nclx":
                prim, transfer = struct.unpack_from(">HH", meta, ps + 4)
                return _Nclx(prim, transfer)
    return None


def _heif_extents_in_file(src: Path) -> bool:
    """Whether every file-offset extent of the ``iloc`` box ends inside the file.

    A truncated HEIF loses the end of its ``mdat``; libheif would decode the grid tiles it still has
    and fill the rest. Extents in ``idat`` or other items, and "to the end" (length 0), pass.
    """
    try:
        size = src.stat().st_size
        meta = _read_top_box(src, b"meta", limit=1 << 22)
    except OSError:
        return False
    if meta is None or len(meta) < 4:
        return False
    iloc = next(((s, e) for k, s, e in _boxes(meta, 4, len(meta)) if k == b"iloc"), None)
    if iloc is None:
        return False
    data, pos, end = meta, iloc[0], iloc[1]

    def read(width: int) -> int:
        nonlocal pos
        if pos + width > end:
            raise ValueError("iloc box too short")
        value = int.from_bytes(data[pos : pos + width], "big")
        pos += width
        return value

    try:
        version = read(1)
        read(3)  # flags
        sizes = read(2)
        offset_size, length_size = sizes >> 12, (sizes >> 8) & 15
        base_size, index_size = (sizes >> 4) & 15, (sizes & 15 if version in (1, 2) else 0)
        for _ in range(read(2 if version < 2 else 4)):
            read(2 if version < 2 else 4)  # item id
            method = read(2) & 15 if version in (1, 2) else 0
            read(2)  # data reference index
            base = read(base_size)
            for _ in range(read(2)):
                read(index_size)
                offset, length = base + read(offset_size), read(length_size)
                if method == 0 and length and offset + length > size:
                    return False
    except ValueError:
        return False
    return True


def _sequence_frames(src: Path) -> int:
    """Frames of the first picture track of a HEIF/AVIF image sequence; 1 for a still.

    libvips reads only the still items of HEIF, never the ``pict`` track of an ``avis`` file.
    """
    try:
        moov = _read_top_box(src, b"moov", limit=1 << 22)
    except OSError:
        return 1
    if moov is None:
        return 1
    for kind, start, end in _boxes(moov, 0, len(moov)):
        if kind != b"trak":
            continue
        mdia = _child(moov, start, end, b"mdia")
        hdlr = mdia and _child(moov, *mdia, b"hdlr")
        if not mdia or not hdlr or moov[hdlr[0] + 8 : hdlr[0] + 12] != b"pict":
            continue
        stsz = _child(moov, *mdia, b"minf", b"stbl", b"stsz")
        if stsz and stsz[1] - stsz[0] >= 12:
            return max(1, int(struct.unpack_from(">I", moov, stsz[0] + 8)[0]))
    return 1


def _child(data: bytes, start: int, end: int, *path: bytes) -> tuple[int, int] | None:
    """(payload start, end) of the box at ``path`` below ``data[start:end]``."""
    for kind in path:
        found = next(((s, e) for k, s, e in _boxes(data, start, end) if k == kind), None)
        if found is None:
            return None
        start, end = found
    return start, end


def _item_properties(data: bytes, start: int, end: int, *, item: int) -> list[int]:
    version, flags = data[start], int.from_bytes(data[start + 1 : start + 4], "big")
    (count,) = struct.unpack_from(">I", data, start + 4)
    pos = start + 8
    for _ in range(count):
        if pos + 3 > end:
            break
        if version < 1:
            (item_id,) = struct.unpack_from(">H", data, pos)
            pos += 2
        else:
            (item_id,) = struct.unpack_from(">I", data, pos)
            pos += 4
        n = data[pos]
        pos += 1
        width = 2 if flags & 1 else 1
        raw = [
            int.from_bytes(data[pos + i * width : pos + (i + 1) * width], "big") for i in range(n)
        ]
        pos += n * width
        if item_id == item:
            return [value & (0x7FFF if width == 2 else 0x7F) for value in raw]
    return []


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, box end) of the boxes in ``data[start:end]``."""
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1 and pos + 16 <= end:
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        if size < header or pos + size > end:
            return
        yield kind, pos + header, pos + size
        pos += size


def _read_top_box(src: Path, kind: bytes, *, limit: int) -> bytes | None:
    """Payload of the first top-level box ``kind`` (at most ``limit`` bytes); skips the others."""
    with src.open("rb") as f:
        while True:
            header = f.read(8)
            if len(header) < 8:
                return None
            size, box = struct.unpack(">I4s", header)
            consumed = 8
            if size == 1:
                (size,) = struct.unpack(">Q", f.read(8))
                consumed = 16
            if box == kind:
                if size == 0 or size - consumed > limit:
                    return None
                return f.read(size - consumed)
            if size < consumed:
                return None
            f.seek(size - consumed, os.SEEK_CUR)


# --- encode -----------------------------------------------------------------------------------


def _encode(image: pyvips.Image, image_format: str, quality: int) -> bytes:
    # keep="none" drops EXIF, XMP, IPTC and ICC (the pixels are sRGB, the web default).
    if image_format == "webp":
        data = image.webpsave_buffer(Q=quality, keep="none")
    elif image_format == "jpeg":
        data = image.jpegsave_buffer(Q=quality, keep="none", optimize_coding=True)
    else:
        data = image.heifsave_buffer(Q=quality, keep="none", compression="av1")
    return bytes(data)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
