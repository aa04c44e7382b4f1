"""HEIC (HEVC) pixels through pillow-heif, for libvips builds without an HEVC decoder.

The pyvips-binary wheel ships no HEVC decoder. The header (hence ``probe_image``) comes from
libvips as for every format; when libvips then reports that it has no HEVC decoder, the pixels
are decoded (once) by pillow-heif instead, whose libheif bundles libde265, wrapped as a libvips
image with the file's ICC profile, and go through the same shrink and colour steps. libheif
applies the ``irot``/``imir`` transforms, so the EXIF orientation tag (an iPhone writes both) is
ignored, as libvips does for HEIF. pillow-heif decodes a truncated grid with the missing tiles
filled in, so the item extents are checked against the file size first. AVIF (AV1) never takes
this path: libvips decodes it itself.
"""

from __future__ import annotations

from pathlib import Path

import pyvips

from conveyor.errors import MediaError
from conveyor.media.halts import MediaHalt
from conveyor.media.images.colour import has_icc, is_hdr, shrink_heif, to_srgb8
from conveyor.media.images.header import too_many_pixels, undecodable
from conveyor.media.images.isobmff import Nclx, heif_extents_in_file

__all__ = ["decode_hevc"]

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
        return MediaError(
            MediaHalt.UNSUPPORTED_MEDIA, f"{src.name}: no HEVC (HEIC) decoder is installed"
        )
    return MediaError(
        MediaHalt.UNDECODABLE, f"{src.name} cannot be decoded (damaged or truncated): {text}"
    )


def decode_hevc(src: Path, target: int, nclx: Nclx | None, max_pixels: int) -> pyvips.Image:
    """HEIC through pillow-heif: one full decode, then ``shrink_heif`` as for libvips.

    Returns:
        Upright 8-bit sRGB, longest edge ``target``, rendered into memory.

    Raises:
        MediaError: ``undecodable`` (damaged, truncated), ``unsupported_media`` (no decoder,
            unknown pixel mode), ``too_many_pixels``.
    """
    if not heif_extents_in_file(src):
        raise MediaError(
            MediaHalt.UNDECODABLE,
            f"{src.name} cannot be decoded (damaged or truncated): data past its end",
        )
    hdr = is_hdr(nclx)
    # Imported here: its libheif, libde265 and x265 cost every worker ~5 MB otherwise.
    import pillow_heif

    try:
        # Lazy: the header is parsed here, the pixels are decoded when .data is read.
        heif = pillow_heif.open_heif(src, convert_hdr_to_8bit=not hdr)
        width, height = heif.size
        mode = str(heif.mode)
        icc = heif.info.get("icc_profile")
    except _PILLOW_HEIF_ERRORS as exc:
        raise _pillow_heif_error(src, exc) from exc
    if width * height > max_pixels:
        raise too_many_pixels(width, height, max_pixels)
    if mode not in _HEIF_MODES:
        raise MediaError(
            MediaHalt.UNSUPPORTED_MEDIA, f"{src.name}: HEIF pixel mode {mode} not supported"
        )
    try:
        data = heif.data  # decoded here, irot/imir already applied by libheif
        stride = heif.stride
    except _PILLOW_HEIF_ERRORS as exc:
        raise _pillow_heif_error(src, exc) from exc
    del heif
    bands = len(mode.split(";")[0].replace("I", "L"))
    fmt = "ushort" if mode.endswith((";16", ";16L")) else "uchar"
    if stride != width * bands * (2 if fmt == "ushort" else 1):  # remove_stride is the default
        raise MediaError(MediaHalt.UNDECODABLE, f"{src.name}: unexpected row stride {stride}")
    try:
        image = pyvips.Image.new_from_memory(data, width, height, bands, fmt)  # no copy
        del data  # the image keeps the buffer alive until it is dropped below
        image = image.copy(interpretation=_HEIF_MODES[mode])
        if "a" in mode.split(";")[0]:  # premultiplied alpha
            image = image.unpremultiply().cast(fmt)
        if isinstance(icc, bytes) and icc:
            image.set_type(pyvips.GValue.blob_type, "icc-profile-data", icc)
        to_srgb = {"output_profile": "srgb"} if has_icc(image) else {}
        image = shrink_heif(image, target, None if to_srgb else nclx, to_srgb)
        return to_srgb8(image).copy_memory()
    except pyvips.Error as exc:
        raise undecodable(src, exc) from exc
