"""HDR AVIF pixels through dav1d (PyAV), shrunk before they become RGB: bounded memory.

libheif (inside libvips) decodes a 20 MP 10-bit AVIF with libaom and converts it to 16-bit RGB at
full size: about 500 MB and 8 s for one photo. Here the primary item's AV1 data is read from the
file (:func:`~conveyor.media.images.isobmff.primary_item`) and decoded by dav1d, which keeps one
frame (the YUV planes, 124 MB for 20 MP 4:4:4 10-bit); each plane is resized to the target size
straight from dav1d's buffer, and only the small result is converted to R'G'B' and tone mapped.
Resizing is linear and so is the YUV → R'G'B' matrix, so the order does not change the result
beyond rounding (a test compares the pixels with the libvips path).

Only the plain case takes this path: an ``av01`` item with its data in the file, PQ or HLG
``nclx``, a known matrix, no ``irot``/``imir``/``clap`` (libheif applies those), no alpha or other
auxiliary image. Everything else (:func:`decode_av1_hdr` returns None) goes through libvips.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import av
import pyvips

from conveyor.errors import MediaError
from conveyor.media.halts import MediaHalt
from conveyor.media.images.colour import is_hdr, tone_map
from conveyor.media.images.isobmff import Nclx, PrimaryItem

__all__ = ["decode_av1_hdr", "takes_fast_path"]

# H.273 matrix coefficients → (Kr, Kb).
_MATRICES = {
    1: (0.2126, 0.0722),  # BT.709
    5: (0.299, 0.114),  # BT.470 BG / BT.601
    6: (0.299, 0.114),  # SMPTE 170M / BT.601
    9: (0.2627, 0.0593),  # BT.2020 non-constant luminance
}
_FORMATS = {  # dav1d output → (bit depth, chroma planes)
    "yuv420p": (8, 2),
    "yuv422p": (8, 2),
    "yuv444p": (8, 2),
    "gray": (8, 0),
    "yuv420p10le": (10, 2),
    "yuv422p10le": (10, 2),
    "yuv444p10le": (10, 2),
    "gray10le": (10, 0),
    "yuv420p12le": (12, 2),
    "yuv422p12le": (12, 2),
    "yuv444p12le": (12, 2),
    "gray12le": (12, 0),
}


def takes_fast_path(item: PrimaryItem | None) -> bool:
    """True when :func:`decode_av1_hdr` handles ``item`` (see the module docstring)."""
    return (
        item is not None
        and item.item_type == b"av01"
        and bool(item.extents)
        and is_hdr(item.nclx)
        and item.nclx is not None
        and item.nclx.matrix in _MATRICES
        and not item.transforms
        and not item.has_auxiliary
    )


def decode_av1_hdr(src: Path, item: PrimaryItem, target: int) -> pyvips.Image | None:
    """Decode ``item`` of ``src``, shrink it to longest edge ``target``, tone map to 8-bit sRGB.

    Args:
        src: the AVIF file.
        item: its primary item; :func:`takes_fast_path` must be true of it.
        target: longest edge of the result in pixels; never upscaled.

    Returns:
        An uncomputed libvips image (3 bands, uchar, sRGB), or None when dav1d's output is a
        kind this path does not handle (the caller falls back to libvips).

    Raises:
        MediaError: ``undecodable`` when the data is cut short or dav1d refuses it.
    """
    nclx = item.nclx
    assert nclx is not None
    data = bytearray()
    try:
        with src.open("rb") as f:
            for offset, length in item.extents:
                f.seek(offset)
                data += f.read(length)
    except OSError as exc:
        raise MediaError(
            MediaHalt.UNDECODABLE, f"{src.name} cannot be read: {exc.strerror}"
        ) from exc
    if len(data) != sum(length for _, length in item.extents):
        raise MediaError(
            MediaHalt.UNDECODABLE,
            f"{src.name} cannot be decoded (damaged or truncated): data past its end",
        )
    context = cast(av.VideoCodecContext, av.CodecContext.create("libdav1d", "r"))
    # One frame in flight: dav1d keeps no extra pictures for frame threading (a still has one).
    context.options = {"max_frame_delay": "1"}
    if len(item.config) > 4:  # av1C with configOBUs (the sequence header)
        context.extradata = item.config
    try:
        frames = [*context.decode(av.Packet(bytes(data))), *context.decode(None)]
    except av.FFmpegError as exc:
        raise MediaError(
            MediaHalt.UNDECODABLE,
            f"{src.name} cannot be decoded (damaged or truncated): {exc.strerror}",
        ) from exc
    del data, context  # dav1d's own buffers go; the frame keeps its picture
    if not frames:
        return None
    frame = frames[0]
    del frames
    shape = _FORMATS.get(frame.format.name)
    if shape is None:
        return None
    depth, chroma = shape
    width, height = int(frame.width), int(frame.height)
    scale = min(1.0, target / max(width, height))
    out_w, out_h = max(1, round(width * scale)), max(1, round(height * scale))
    planes = [_plane(frame, i, depth, out_w, out_h) for i in range(1 + chroma)]
    # One streaming pass from dav1d's planes to 8-bit sRGB: only the small result is allocated.
    return tone_map(_code_values(planes, depth, nclx), nclx).copy_memory()


def _plane(frame: av.VideoFrame, index: int, depth: int, out_w: int, out_h: int) -> pyvips.Image:
    """One plane, zero-copy from dav1d's buffer, resized to ``out_w`` × ``out_h``."""
    plane = frame.planes[index]
    sample = 1 if depth == 8 else 2
    image = pyvips.Image.new_from_memory(
        memoryview(plane),
        plane.line_size // sample,
        plane.height,
        1,
        "uchar" if depth == 8 else "ushort",
    )
    image = image.crop(0, 0, plane.width, plane.height)
    if (plane.width, plane.height) != (out_w, out_h):
        image = image.resize(out_w / plane.width, vscale=out_h / plane.height)
        if (image.width, image.height) != (out_w, out_h):  # rounding of the scale
            image = image.gravity("north-west", out_w, out_h, extend="copy")
    return image.cast("float")


def _code_values(planes: list[pyvips.Image], depth: int, nclx: Nclx) -> pyvips.Image:
    """Y'CbCr planes (same size, float code values) → 16-bit R'G'B' (uncomputed)."""
    top = float((1 << depth) - 1)
    half = float(1 << (depth - 1))
    shift = float(1 << (depth - 8))
    if nclx.full_range:
        y = planes[0] / top
        chroma = [(p - half) / top for p in planes[1:]]
    else:
        y = (planes[0] - 16.0 * shift) / (219.0 * shift)
        chroma = [(p - half) / (224.0 * shift) for p in planes[1:]]
    if not chroma:
        rgb = y.bandjoin([y, y])
    else:
        kr, kb = _MATRICES[nclx.matrix]
        kg = 1.0 - kr - kb
        rgb = y.bandjoin(chroma).recomb(
            [
                [1.0, 0.0, 2.0 * (1.0 - kr)],
                [1.0, -2.0 * kb * (1.0 - kb) / kg, -2.0 * kr * (1.0 - kr) / kg],
                [1.0, 2.0 * (1.0 - kb), 0.0],
            ]
        )
    return (rgb * 65535.0 + 0.5).clamp(min=0.0, max=65535.0).cast("ushort")
